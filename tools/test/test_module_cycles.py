"""No two modules of a package import each other (at run time or for typing): a frame and its publisher, say.

Two modules that need each other are one concept split in two, or a third thing both need: what both need
moves down (a Protocol in core names what one needs of the other)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def relative_targets(node: ast.AST, module: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The modules a relative import in ``module`` (its parts in the package) names: ``from .x import a`` names
    ``x``, ``from . import x`` names ``x``; none for any other statement."""
    if not (isinstance(node, ast.ImportFrom) and node.level):
        return []
    base = module[:-node.level]
    names = [alias.name for alias in node.names] if node.module is None else [node.module]
    return [(*base, *name.split(".")) for name in names]


def _relative_imports(path: Path, module: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {target for node in ast.walk(ast.parse(path.read_text())) for target in relative_targets(node, module)}


def _two_module_cycles(package: Path) -> list[str]:
    imports = {}
    for path in package.rglob("*.py"):
        if "test" in path.relative_to(package).parts:
            continue
        module = path.relative_to(package).with_suffix("").parts
        imports[module[:-1] if module[-1] == "__init__" else module] = _relative_imports(path, module)
    return sorted(f"{'.'.join(a)} <-> {'.'.join(b)}" for a, deps in imports.items() for b in deps
                  if a < b and b in imports and a in imports[b] and a[:len(b)] != b and b[:len(a)] != a)


def test_no_two_modules_of_a_package_import_each_other():
    packages = [p for p in ROOT.glob("ros2_cuda_ipc_*/ros2_cuda_ipc_*") if (p / "__init__.py").exists()]
    assert len(packages) >= 6, packages
    cycles = {package.name: _two_module_cycles(package) for package in packages}
    assert not any(cycles.values()), cycles


def test_the_check_sees_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "frame.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .publisher import P\n")
    (package / "publisher.py").write_text("from .frame import F\n")
    assert _two_module_cycles(package) == ["frame <-> publisher"]

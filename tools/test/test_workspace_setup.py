"""``make setup`` refuses what it cannot set up, at once and saying why; a venv it cannot use is recreated."""

import argparse
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import workspace

ROOT = Path(__file__).resolve().parents[2]
FAST = 15.0  # seconds: a refusal comes before anything is created or downloaded (generous on a loaded 2-core host)


def make_env(**overrides: str) -> dict[str, str]:
    """The environment of a user's shell: no outer make's variables, no ROS install sourced, unless asked."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ROS_DISTRO", "ROS_VERSION", "AMENT_PREFIX_PATH")}
    env.update(overrides)
    return env


def run_make(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args], env=env or make_env(),
                          capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - started


@pytest.mark.parametrize("version", ["3.9", "3.13"])
def test_unsupported_python_is_refused_before_anything_is_made(tmp_path, version):
    python = workspace.find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    venv = tmp_path / "venv"
    done, seconds = run_make("setup", f"PYTHON={python}", f"VENV={venv}")
    assert done.returncode != 0
    assert seconds < FAST
    assert f"is Python {version}." in done.stderr
    assert "supports Python 3.10, 3.11 and 3.12" in done.stderr and "PYTHON=python3.12" in done.stderr
    assert "Traceback" not in done.stderr
    assert not venv.exists()


def test_missing_python_is_named(tmp_path):
    done, seconds = run_make("setup", "PYTHON=python3.10-does-not-exist", f"VENV={tmp_path / 'venv'}")
    assert done.returncode != 0 and seconds < FAST
    assert "python3.10-does-not-exist: No such file or directory" in done.stderr
    assert "supports Python 3.10, 3.11 and 3.12" in done.stderr


def test_unpinned_distro_is_refused_and_the_colcon_path_named(tmp_path):
    venv = tmp_path / "venv"
    done, seconds = run_make("setup", "ROS_DISTRO=humble", f"VENV={venv}")
    assert done.returncode == 2 and seconds < FAST
    assert "ROS 2 'humble' is not pinned here" in done.stderr
    assert "pinned for kilted and jazzy only" in done.stderr
    assert "source its ROS install (/opt/ros/humble/setup.bash) and build with colcon" in done.stderr
    assert "colcon build --symlink-install" in done.stderr
    assert "sourced in this shell" not in done.stderr
    assert not venv.exists()


def test_a_sourced_unpinned_ros_install_is_named():
    env = make_env(ROS_DISTRO="rolling", ROS_VERSION="2", AMENT_PREFIX_PATH="/opt/ros/rolling")
    done, seconds = run_make("setup", env=env)
    assert done.returncode == 2 and seconds < FAST
    assert "ROS_DISTRO=rolling comes from the ROS 2 install sourced in this shell (/opt/ros/rolling)" in done.stderr
    assert "in a shell without a ROS install sourced" in done.stderr


@pytest.mark.parametrize("environment,distro", [({}, "kilted"), ({"ROS_DISTRO": ""}, "kilted"),
                                                 ({"ROS_DISTRO": "jazzy", "ROS_VERSION": "2"}, "jazzy")])
def test_pinned_or_unset_distro_goes_through(environment, distro):
    done, _ = run_make("-n", "setup", env=make_env(**environment))
    assert done.returncode == 0, done.stderr
    assert f"--distro '{distro}'" in done.stdout


def test_pinned_distro_accepts_only_the_locks():
    assert [workspace.pinned_distro(d) for d in workspace.DISTROS] == list(workspace.DISTROS)
    assert all((workspace.REQUIREMENTS / f"{d}.txt").exists() for d in workspace.DISTROS)
    with pytest.raises(argparse.ArgumentTypeError, match="'rolling' is not pinned"):
        workspace.pinned_distro("rolling")


def this_interpreter() -> workspace.Interpreter:
    return workspace.identify(sys.executable)


def test_venv_of_another_python_is_recreated_then_reused(tmp_path):
    other = workspace.find_python("3.9") or workspace.find_python("3.13")
    if other is None:
        pytest.skip("needs a Python other than the workspace's (3.9 or 3.13)")
    venv, builds = tmp_path / "venv", [tmp_path / "build", tmp_path / "install"]
    subprocess.run([other, "-m", "venv", "--without-pip", str(venv)], check=True)
    for folder in builds:
        folder.mkdir()
    base, notes = this_interpreter(), []

    python = workspace.prepare_venv(venv, sys.executable, base, builds, notes.append)

    assert workspace.identify(python).micro == base.micro
    assert any("recreating it: it was made by Python 3." in n for n in notes), notes
    assert not any(folder.exists() for folder in builds)
    assert (venv / "COLCON_IGNORE").exists()
    kept = venv / "kept"
    kept.touch()
    notes.clear()
    assert workspace.prepare_venv(venv, sys.executable, base, builds, notes.append) == python
    assert notes == ["exists, made by this interpreter"] and kept.exists()


def test_broken_venv_is_recreated(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /gone\n")
    (venv / "bin" / "python").symlink_to(tmp_path / "gone" / "python3")
    notes = []
    python = workspace.prepare_venv(venv, sys.executable, this_interpreter(), [], notes.append)
    assert workspace.identify(python).micro == this_interpreter().micro
    assert any("recreating it: it is broken" in n for n in notes), notes


def test_underlay_scripts_silence_colcon_and_put_the_venv_on_the_paths_once(tmp_path, caplog):
    from colcon_ros.prefix_path.ament import AmentPrefixPath  # type: ignore[import-untyped]

    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    workspace.write_underlay_scripts({"prefix": str(prefix), "scripts": str(prefix / "bin")})
    with pytest.MonkeyPatch.context() as patch, caplog.at_level(logging.WARNING):
        patch.setenv("AMENT_PREFIX_PATH", str(prefix))
        found: list[str] = []
        AmentPrefixPath().extend_prefix_path(found)
    assert found == [str(prefix)]
    assert "local_setup" not in caplog.text
    script = prefix / "local_setup.sh"
    shown = subprocess.run(["sh", "-c", f'. "{script}"; . "{script}"; echo "$PATH"; echo "$AMENT_PREFIX_PATH"'],
                           env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True).stdout.split()
    assert shown == [f"{prefix / 'bin'}:/usr/bin:/bin", str(prefix)]


def test_the_setup_build_registers_the_message_tests_for_colcon_test():
    build = ROOT / "build" / "ros2_cuda_ipc_msgs"
    if not (build / "CTestTestfile.cmake").exists() or shutil.which("ctest") is None:
        pytest.skip("needs the workspace built by 'make setup' and CMake's ctest")
    listed = subprocess.run(["ctest", "--test-dir", str(build), "-N"], capture_output=True, text=True, check=True).stdout
    assert "test_messages" in listed and "test_dds" in listed


def test_pip_warnings_of_a_local_index_without_the_package_are_hidden_and_counted(tmp_path, capfd):
    """This machine's pip.conf names file:// indexes (extra-index-url) that hold a few packages: pip warned
    "Location 'file:///.../<name>/' is ignored" for every other one, 303 lines burying a first setup."""
    index = tmp_path / "simple"
    index.mkdir()
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--disable-pip-version-check",
               "--isolated", "--index-url", index.as_uri(), "no-such-package-anywhere==1.0"]
    with pytest.raises(subprocess.CalledProcessError):
        workspace.run_pip(command)
    out, err = capfd.readouterr()
    assert "is ignored: it is neither a file nor a directory" not in err, err
    assert f"(hid 1 pip warning that {index.as_uri()}, a local index" in out, out
    assert "ERROR: No matching distribution found for no-such-package-anywhere==1.0" in err, err  # errors pass


def _package(root: Path, name: str, build_type: str) -> Path:
    package = root / name
    (package / name).mkdir(parents=True)
    (package / "test").mkdir()
    (package / "package.xml").write_text(f"<package><name>{name}</name><export><build_type>{build_type}</build_type>"
                                         "</export></package>\n")
    (package / name / "module.py").write_text("X = 1\n")
    (package / "test" / "test_it.py").write_text("def test(): pass\n")
    (package / "setup.py").write_text("setup()\n")
    (package / "README.md").write_text("# it\n")
    return package


def test_a_setup_builds_again_only_when_what_colcon_installs_changed(tmp_path):
    """A no-op setup took 13.6-15.1 s, nearly all of it colcon build rerunning every package."""
    python = _package(tmp_path, "pkg_py", "ament_python")
    cmake = _package(tmp_path, "pkg_msgs", "ament_cmake")
    (tmp_path / "build" / "copy").mkdir(parents=True)
    (tmp_path / "build" / "copy" / "package.xml").write_text("<package><name>copy</name></package>\n")
    assert workspace.colcon_packages(tmp_path) == [cmake, python]
    before = workspace.build_inputs(tmp_path)
    for live in (python / "pkg_py" / "module.py", python / "pkg_py" / "new.py", python / "test" / "test_it.py",
                 python / "README.md"):
        live.write_text("changed = True\n")  # linked by the build (or not installed): no rebuild
    assert workspace.build_inputs(tmp_path) == before
    for installed in (python / "setup.py", python / "launch" / "new.launch.py", cmake / "test" / "test_it.py",
                      cmake / "pkg_msgs" / "module.py", tmp_path / "another" / "package.xml"):
        installed.parent.mkdir(exist_ok=True)
        installed.write_text(f"{installed.name} changed\n")
        assert workspace.build_inputs(tmp_path) != before, installed
        before = workspace.build_inputs(tmp_path)
    assert not workspace.built(tmp_path)  # no install/: built whatever the stamp says

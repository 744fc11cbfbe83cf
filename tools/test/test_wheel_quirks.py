"""The CMake-export repair: rewrites the container paths, leaves nothing behind, and is idempotent."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import wheel_quirks

ORIGINAL = (
    'set_target_properties(std_msgs::std_msgs__rosidl_generator_py PROPERTIES\n'
    '  INTERFACE_INCLUDE_DIRECTORIES "/opt/python/cp312-cp312/include/python3.12;'
    '/opt/python/cp312-cp312/lib/python3.12/site-packages/numpy/_core/include"\n)\n'
)


def make_prefix(tmp_path: Path, text: str = ORIGINAL) -> Path:
    cmake = tmp_path / "share" / "std_msgs" / "cmake"
    cmake.mkdir(parents=True)
    (cmake / "export_std_msgs__rosidl_generator_pyExport.cmake").write_text(text)
    (cmake / "unrelated.cmake").write_text("/opt/python/cp312-cp312/include/python3.12")
    return tmp_path


def test_rewrite_replaces_both_paths():
    out = wheel_quirks.rewrite_include_paths(ORIGINAL, "/venv/include/python3.11", "/np/include")
    assert "/opt/python/" not in out
    assert '"/venv/include/python3.11;/np/include"' in out


def test_rewrite_handles_old_numpy_layout():
    old = "/opt/python/cp310-cp310/lib/python3.10/site-packages/numpy/core/include"
    assert wheel_quirks.rewrite_include_paths(old, "/py", "/np") == "/np"


def test_fix_prefix_is_idempotent_and_complete(tmp_path):
    prefix = make_prefix(tmp_path)
    assert wheel_quirks.leftover_container_paths(prefix)
    changed = wheel_quirks.fix_prefix(prefix, "/py/include", "/np/include")
    assert [p.name for p in changed] == ["export_std_msgs__rosidl_generator_pyExport.cmake"]
    assert wheel_quirks.leftover_container_paths(prefix) == []
    first = changed[0].read_text()
    assert wheel_quirks.fix_prefix(prefix, "/py/include", "/np/include") == []
    assert changed[0].read_text() == first
    # Only the Python export files are touched.
    assert "/opt/python/" in (prefix / "share/std_msgs/cmake/unrelated.cmake").read_text()


def test_installed_environment_has_no_container_paths():
    prefix = Path(sys.prefix)
    if not list(prefix.glob(wheel_quirks.PY_EXPORT_GLOB)):
        import pytest

        pytest.skip("this interpreter has no ROS wheels' CMake exports (a sourced ROS install)")
    assert wheel_quirks.leftover_container_paths(prefix) == []

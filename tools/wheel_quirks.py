"""Repairs for ROS 2 wheels from PyPI that a source install never needs.

The ``ros-*`` wheels are built in manylinux containers, and the CMake export
files of their generated Python message libraries name that container's
interpreter (``/opt/python/cp3XX-cp3XX/...``).  Building our own interface
package against them then fails, because those include directories do not
exist here.  We point them at the interpreter and numpy that really run.
"""

from __future__ import annotations

import re
from pathlib import Path

#: CMake files that carry the container's include paths.
PY_EXPORT_GLOB = "share/*/cmake/*rosidl_generator_pyExport*.cmake"

_NUMPY_INCLUDE = re.compile(r"/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/(?:_core|core)/include")
_PYTHON_INCLUDE = re.compile(r"/opt/python/cp3\d+-cp3\d+/include/python3\.\d+")


def rewrite_include_paths(text: str, python_include: str, numpy_include: str) -> str:
    """Return ``text`` with the build container's include paths replaced.

    Idempotent: text that names no ``/opt/python/`` path comes back unchanged.
    """
    text = _NUMPY_INCLUDE.sub(numpy_include, text)
    return _PYTHON_INCLUDE.sub(python_include, text)


def fix_prefix(prefix: Path, python_include: str, numpy_include: str) -> list[Path]:
    """Rewrite every Python export file under ``prefix``; return the files changed."""
    changed = []
    for path in sorted(prefix.glob(PY_EXPORT_GLOB)):
        old = path.read_text()
        new = rewrite_include_paths(old, python_include, numpy_include)
        if new != old:
            path.write_text(new)
            changed.append(path)
    return changed


def leftover_container_paths(prefix: Path) -> list[Path]:
    """Export files under ``prefix`` that still name an ``/opt/python/`` path."""
    return [p for p in sorted(prefix.glob(PY_EXPORT_GLOB)) if "/opt/python/" in p.read_text()]

"""Test support (not shipped): what the viewer's tests draw with, or why they skip.

``x_display`` (the viewer tests' ``display`` fixture) gives an X display: the one in ``DISPLAY``, or an
Xvfb it starts when ``Xvfb`` is installed (``tools/gl_test_deps.sh`` installs it with Mesa);
``EGL_PROBLEM`` says why a headless EGL context cannot be made in a child process here (None when it can).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

# The viewer's own way to its headless context (it picks the NVIDIA EGL vendor file where a container has one).
_PROBE = ("from ros2_cuda_ipc_tools.viewer.surface import open_surface; "
          "print(open_surface((16, 16), headless=True).renderer)")


def _egl_problem() -> str | None:
    try:
        import moderngl  # noqa: F401
    except ImportError as exc:
        return f"moderngl is not installed ({exc}): the tools package's 'viewer' extra"
    probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"no headless OpenGL 3.3 through EGL: {probe.stderr.strip().splitlines()[-1:]}"
    return None


#: Why headless EGL rendering cannot run here, or None where it can.
EGL_PROBLEM = _egl_problem()
needs_egl = pytest.mark.skipif(EGL_PROBLEM is not None, reason=f"needs headless EGL: {EGL_PROBLEM}")


@contextmanager
def x_display() -> Iterator[str]:
    """An X display for a window test: ``DISPLAY``, or a fresh Xvfb (stopped after the module)."""
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    if shutil.which("Xvfb") is None:
        pytest.skip("no DISPLAY and no Xvfb to start one (tools/gl_test_deps.sh installs it as root)")
    read, write = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x1024x24", "-nolisten", "tcp"],
                              pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as numbers:
        number = numbers.readline().strip()  # Xvfb writes its display number once it accepts connections
    if not number:
        server.kill()
        server.wait()
        pytest.skip("Xvfb did not start")
    try:
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(timeout=10)

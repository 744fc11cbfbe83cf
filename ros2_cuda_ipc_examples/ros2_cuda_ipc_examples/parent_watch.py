"""Children of the pipeline runner end with it, even when it is SIGKILLed.

The runner names itself in ``ROS2_CUDA_IPC_PARENT_PID``; the child asks the kernel for SIGTERM
when its parent dies (``PR_SET_PDEATHSIG``) as the first thing it does.  This replaces a
``preexec_fn``, which runs Python between fork and exec: unsafe in a process with threads, and
on a GPU machine the runner may hold torch's and CUDA's threads and fork handlers.
"""

from __future__ import annotations

import ctypes
import os
import signal

__all__ = ["PARENT_PID_VARIABLE", "end_with_parent"]

PARENT_PID_VARIABLE = "ROS2_CUDA_IPC_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def end_with_parent() -> None:
    """SIGTERM this process when the runner that started it dies; exit now if it already has."""
    parent = os.environ.pop(PARENT_PID_VARIABLE, None)
    if parent is None:
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(parent):  # the runner died before the request was made
        raise SystemExit(0)

"""Children of the pipeline runner end with it, even when it is SIGKILLed, and say where they are when a stop
does not end them.

The runner names itself in ``ROS2_CUDA_IPC_PARENT_PID``; the child asks the kernel for SIGTERM
when its parent dies (``PR_SET_PDEATHSIG``) as the first thing it does.  This replaces a
``preexec_fn``, which runs Python between fork and exec: unsafe in a process with threads, and
on a GPU machine the runner may hold torch's and CUDA's threads and fork handlers.

A child still running long after the runner asked it to stop is sent :data:`STACKS_SIGNAL` before it
is killed: ``faulthandler`` then writes every thread's Python stack to the child's stderr (its log),
from the signal handler itself, so even a thread stuck in C code holding the GIL cannot keep it quiet.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal

__all__ = ["PARENT_PID_VARIABLE", "STACKS_SIGNAL", "follow_runner"]

PARENT_PID_VARIABLE = "ROS2_CUDA_IPC_PARENT_PID"
STACKS_SIGNAL = signal.SIGUSR1
_PR_SET_PDEATHSIG = 1


def follow_runner() -> None:
    """In a process the runner started: SIGTERM it when the runner dies (exit now if it already has), and print
    every thread's stack on :data:`STACKS_SIGNAL`.  Nothing in a process started otherwise."""
    parent = os.environ.pop(PARENT_PID_VARIABLE, None)
    if parent is None:
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(parent):  # the runner died before the request was made
        raise SystemExit(0)
    faulthandler.register(STACKS_SIGNAL, all_threads=True)

"""The first thing the package does when it is imported: in one of this workspace's executables, hold stop signals.

An executable spends its first second or so importing numpy, rclpy and the rest before :func:`~.shutdown.run_nodes`
or :func:`~.shutdown.run_tool` puts its stop handlers in.  A Ctrl-C there was a ``KeyboardInterrupt`` traceback
from the middle of an import, and a SIGINT that came while it was still ignored (a shell script's ``cmd &``
starts a process so) was lost.  Importing this module (``ros2_cuda_ipc_core``'s first import) makes SIGINT and
SIGTERM a clean exit (code 0) from then on, in an executable of ours only: a program that merely imports the
library keeps its own handlers.  The runner that takes over puts its own handlers in, then asks
:func:`stops_while_starting`, and ends at once if a stop came that Python swallowed.

What runs before this module cannot be helped here: the interpreter's own start and the setuptools script's
``importlib.metadata`` look-up (0.2-0.4 s on a loaded machine) still end in a ``KeyboardInterrupt``.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

__all__ = ["hold_stops_while_starting", "stops_while_starting"]

#: The distributions and packages of this workspace: what names an executable of ours.
_OURS = "ros2_cuda_ipc_"
#: Stops noted while an executable starts (see :func:`hold_stops_while_starting`); None while none is held.
_held: list[int] | None = None


def _an_executable_of_ours() -> bool:
    """Whether ``__main__`` is one of this workspace's console scripts or ``python -m`` modules."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    requires = getattr(main, "__requires__", "")  # a setuptools entry script names its distribution
    return (spec is not None and str(spec.name).startswith(_OURS)) or \
        (isinstance(requires, str) and requires.replace("-", "_").startswith(_OURS))


def hold_stops_while_starting() -> None:
    """In one of this workspace's executables, from now on until :func:`~.shutdown.run_nodes` or
    :func:`~.shutdown.run_tool` takes over, SIGINT and SIGTERM end the process with exit code 0 and no traceback
    (``SystemExit``: the imports and start-up under way are cut short, their ``finally`` blocks run).  A stop that
    Python swallows (one landing in a destructor) is still noted, and the runner taking over then ends at once.
    Nothing anywhere else (a program that imports the library keeps its own handlers), nor outside the main thread.
    """
    global _held
    if _held is not None or threading.current_thread() is not threading.main_thread() \
            or not _an_executable_of_ours():
        return
    held: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        held.append(signum)
        raise SystemExit(0)

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, stop)
    # A stop that lands where Python swallows exceptions (a destructor, importlib's module-lock weakref callback)
    # printed "Exception ignored ... SystemExit: 0" with a traceback, though it is noted here and the runner ends.
    previous = sys.unraisablehook

    def quiet_stops(unraisable: sys.UnraisableHookArgs) -> None:
        if not isinstance(unraisable.exc_value, SystemExit):
            previous(unraisable)

    sys.unraisablehook = quiet_stops
    _held = held


def stops_while_starting() -> list[int]:
    """The stops :func:`hold_stops_while_starting` noted, for a runner that has just put its own handlers in (so that
    no signal finds a default one between the two); the hold ends.  Its handlers come back when the runner's go,
    and a stop after the run is then a clean exit too."""
    global _held
    held, _held = _held, None
    return held or []


hold_stops_while_starting()

"""Clean ends for nodes and tools: Ctrl-C or SIGTERM stops them with exit code 0 and no traceback.

rclpy turns SIGINT and SIGTERM into a context shutdown, which surfaces as
``KeyboardInterrupt`` or ``ExternalShutdownException`` depending on where the
signal lands; a user who presses Ctrl-C asked for a stop, not for an error.
Every executable of the workspace goes through :func:`run_nodes` (nodes) or
:func:`run_tool` (plain command-line tools).

A stop can also come before either runs, while an executable imports numpy, rclpy and the rest:
:mod:`.startup` (the package's first import) makes it a clean exit there, in executables only.
"""

from __future__ import annotations

import faulthandler
import gc
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from .startup import stops_while_starting

if TYPE_CHECKING:
    from rclpy.executors import Executor
    from rclpy.node import Node

__all__ = ["TEARDOWN_BOUND", "run_nodes", "run_tool", "spin_until_stopped", "stop_reason", "stop_signals_interrupt",
           "stop_signals_noted", "teardown_bounded"]

#: Seconds a teardown may hang before the process ends itself (see :func:`teardown_bounded`): longer than the
#: pipeline runner's stop timeout (15 s), after which the runner asks a child for its C stacks itself.
TEARDOWN_BOUND = 20.0


_Handler = Callable[[int, "FrameType | None"], None]



def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def _stop_signals_to(handler: _Handler) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM go to ``handler``; the handlers before are put back after it."""
    previous = {number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, former in previous.items():
            signal.signal(number, former)


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise ``KeyboardInterrupt`` naming the signal (main thread only).

    SIGINT is installed explicitly: a process started with SIGINT ignored (a shell script's ``cmd &``)
    inherits the ignore, and Python then never raises ``KeyboardInterrupt`` on ``kill -INT``."""
    with _stop_signals_to(_interrupt):
        yield


@contextmanager
def stop_signals_noted() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM are noted in the list it yields, never raised (main thread only).

    For nodes: rclpy's own handler, installed by ``rclpy.init`` over this one and chaining to it, shuts the
    context down and so ends the spin.  A ``KeyboardInterrupt`` raised wherever Python happens to be lands,
    now and then, in a destructor or a gc callback, where Python prints it as "Exception ignored in ..."
    (rclpy's ``Task.__del__``, a CI run) instead of stopping anything.
    """
    noted: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)

    with _stop_signals_to(note):
        yield noted


def spin_until_stopped(spin_once: Callable[[], object], keep_going: Callable[[], bool] = lambda: True) -> None:
    """``spin_once()`` while ``keep_going()``; SIGINT or SIGTERM raises ``KeyboardInterrupt`` (its args the signal's
    name) at once, as under :func:`stop_signals_interrupt`, and also where it lands in the Python that rclpy's C++
    calls while it takes a message (the message's conversion): pybind11 turns it there into ``RuntimeError: Unable
    to convert call argument '0' to Python object``, which ended bag_record with a traceback and exit code 1 (once,
    in a loaded fresh-clone run), and where something on its way swallowed it.  A ``RuntimeError`` with no stop
    noted is raised as it is.  Main thread only."""
    stops: list[int] = []

    def note_and_interrupt(signum: int, frame: FrameType | None) -> None:
        stops.append(signum)
        _interrupt(signum, frame)

    with _stop_signals_to(note_and_interrupt):
        while not stops and keep_going():
            try:
                spin_once()
            except RuntimeError:
                if stops:
                    break
                raise
    if stops:  # turned into a RuntimeError, or swallowed on its way (a destructor's "Exception ignored")
        _interrupt(stops[0], None)


@contextmanager
def teardown_bounded(bound: float = TEARDOWN_BOUND) -> Iterator[None]:
    """Within the block, a hang longer than ``bound`` s ends the process with exit code 1 and every thread's
    Python stack on stderr, so that Ctrl-C always ends it.

    faulthandler's own C thread does it, without the GIL: the hang it is for, Fast DDS 3.2's deadlock when a
    participant is deleted while a peer's removal reaches it (docs/decisions.md), holds the GIL inside
    rclpy's ``destroy_node``, where no Python thread or signal handler can run."""
    faulthandler.dump_traceback_later(bound, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def stop_reason(stop: BaseException) -> str:
    """What ended a run, for its last line: "SIGTERM", or "Ctrl-C" (SIGINT, a plain ``KeyboardInterrupt``)."""
    return "SIGTERM" if stop.args[:1] == ("SIGTERM",) else "Ctrl-C"


def _stop_exceptions() -> tuple[type[BaseException], ...]:
    try:
        from rclpy.executors import ExternalShutdownException
    except ImportError:  # no rclpy: a plain tool
        return (KeyboardInterrupt,)
    return (KeyboardInterrupt, ExternalShutdownException)


def run_tool(main: Callable[[], int | None]) -> int:
    """Run a command-line tool's ``main``; SIGINT / SIGTERM end it with exit code 0 and no traceback.

    The stop's ``KeyboardInterrupt`` may come out as another exception: raised while a C extension runs Python code,
    it is that extension's to report, and pybind11 reports one raised while it converts a call's argument as a
    ``RuntimeError`` ("Unable to convert call argument", rclpy's take on Jazzy, a CI run).  Any exception after a
    stop signal is that stop."""
    stops: list[int] = []

    def note_then_interrupt(signum: int, frame: FrameType | None) -> None:
        stops.append(signum)
        _interrupt(signum, frame)

    try:
        with _stop_signals_to(note_then_interrupt):
            if stops_while_starting():
                return 0
            return int(main() or 0)
    except _stop_exceptions():
        return 0
    except Exception:
        if stops:
            return 0
        raise


@contextmanager
def _stops_deferred(stops: list[int]) -> Iterator[None]:
    """While the nodes are made, a stop is noted in ``stops`` and waits for them to be made; a second one
    raises ``KeyboardInterrupt``, so that a constructor that hangs can still be stopped."""

    def note_then_interrupt(signum: int, frame: FrameType | None) -> None:
        stops.append(signum)
        if len(stops) > 1:
            _interrupt(signum, frame)

    with _stop_signals_to(note_then_interrupt):
        yield


def _freeze_start_up_objects() -> None:
    """Move what start-up made (modules, nodes, torch's and CUDA's objects) out of the collector's sight:
    a full collection then walks only what the frames make, so its pauses stay short in the steady state."""
    gc.collect()
    gc.freeze()


def run_nodes(make_nodes: Callable[[], Sequence[Node]], *, args: list[str] | None = None,
              executor: Executor | Callable[[], Executor] | None = None) -> int:
    """``rclpy.init``, spin the nodes ``make_nodes`` returns until SIGINT / SIGTERM, then tear down; returns 0.

    ``args`` are the command line (``--ros-args`` remappings and parameters apply to every node); ROS arguments
    that rcl cannot parse are a :class:`~.arguments.RosArgumentsError` (one line), raised before ``rclpy.init``.
    ``executor`` may be a factory (an executor class, say): it is called after ``rclpy.init``,
    as an executor needs an initialized context (a class through :func:`new_executor`).  None: the one
    ``ROS2_CUDA_IPC_EXECUTOR`` names (:func:`~.executors.executor_from_environment`), else single-threaded.
    """
    if not faulthandler.is_enabled():  # a crash in a native library then shows where Python was
        faulthandler.enable()
    with stop_signals_noted() as stops:
        stops += stops_while_starting()
        if stops:
            return 0
        return _init_and_spin(make_nodes, args, executor, stops)


def _init_and_spin(make_nodes: Callable[[], Sequence[Node]], args: list[str] | None,
                   executor: Executor | Callable[[], Executor] | None, stops: list[int]) -> int:
    import rclpy
    from rclpy.executors import Executor, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions, install_signal_handlers

    from .arguments import check_ros_arguments
    from .executors import executor_from_environment, new_executor

    check_ros_arguments(sys.argv if args is None else args)
    if executor is None:
        executor = executor_from_environment()  # a name it does not know: one line (ValueError), before rclpy.init
    # rclpy's handlers go in only once the nodes are made: on a signal, its own thread shuts the context down at
    # once, and that, racing the main thread's rcl calls while a node is made, crashed a process now and then
    # (a segmentation fault on SIGINT, 1 start of 60 beside seven other nodes on two busy cores).
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    if stops:  # a stop while rclpy started (noted, as every stop here)
        rclpy.try_shutdown()
        return 0
    nodes: list[Node] = []
    spinner: Executor | None = None
    try:
        with _stops_deferred(stops):
            if isinstance(executor, Executor):
                spinner = executor
            elif executor is None or isinstance(executor, type):
                spinner = new_executor(executor or SingleThreadedExecutor)
            else:
                spinner = executor()
            nodes = list(make_nodes())
            for node in nodes:
                spinner.add_node(node)
            _freeze_start_up_objects()
        if stops:  # a stop while the nodes were made: they are torn down without having spun
            return 0
        install_signal_handlers(SignalHandlerOptions.ALL)  # from now on a stop shuts the context: the spin ends
        if stops:  # one that came just before
            return 0
        if isinstance(spinner, Executor):
            spinner.spin()
        else:  # rclpy's C++ EventsExecutor: its spin() fired no timer here (Kilted's wheel); spin_once() does
            while rclpy.ok():
                spinner.spin_once(timeout_sec=0.1)
    except _stop_exceptions():  # a second stop while the nodes were made, or rclpy's shutdown ending the spin
        pass
    except Exception:
        if rclpy.ok():
            raise
        # The context was shut down while the nodes were being made (rclpy.shutdown in a constructor or another
        # thread; their next rcl call then fails): that is a stop, not an error.
    finally:
        with teardown_bounded():
            if spinner is not None:
                spinner.shutdown(timeout_sec=1.0)
            for node in nodes:
                node.destroy_node()
            rclpy.try_shutdown()
    return 0

"""``cuda_ipc_top``: a live table of every ros2_cuda_ipc pool and reader on the graph, once a second.

    cuda_ipc_top                      # the table, redrawn every second; Ctrl-C ends it (exit code 0)
    cuda_ipc_top --once --json        # one snapshot as JSON, for scripts

Fed from diagnostic_msgs/DiagnosticArray on /diagnostics, which every pool and typed reader
publishes once a second (unless its node's diagnostics parameter is false).  Per pool of a topic:
the publisher (node and pid), memory and device, publish rate, blocks in use by the publisher / held
by readers / free, stale frames dropped by its readers, frames they got through a CPU twin instead
(fallback), each reader (pid:leases held) and the slowest reader's median latency from the stamp.
--once listens --wait seconds, then on (at most 3 s) until every /diagnostics publisher found has
been heard.  Anyone may publish on /diagnostics: names are shown escaped, numbers (ASCII decimal only) that
are not finite as inf or nan, and --json is strict JSON (such a number is null, named in "nonfinite").  A
snapshot is bounded (64 rows, 16 readers a JSON row, short strings); its last line, or the JSON's "cut", says
what was left out.
Named so it never shadows the system's top.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any

from ros2_cuda_ipc_core import (
    DIAGNOSTICS_TOPIC,
    REPORT_PERIOD_S,
    RosArgumentsError,
    check_ros_arguments,
    reported_number,
    run_tool,
    spin_until_stopped,
    teardown_bounded,
    tool_parser,
)

from .board import Board
from .hearing import Hearing
from .render import render_screen

__all__ = ["main"]

#: With --once, seconds to listen first: a new participant (top) finds another either at once or at the other's
#: next announcement, which Fast DDS makes every 3 s (measured here: 0.02 s or 1.6 to 2.7 s, about half each).
DEFAULT_WAIT_S = 3.5
#: With --once, how much longer than --wait to listen for a publisher found but not heard from yet: three reports.
MORE_WAIT_S = 3 * REPORT_PERIOD_S


#: The longest --period or --wait: a day (a longer one, or inf, would never show a snapshot).
MAX_SECONDS = 86_400.0


def _positive(text: str) -> float:
    """``--period`` and ``--wait``: seconds, a decimal number in (0, MAX_SECONDS]."""
    import argparse

    value = reported_number(text)
    if value is None or not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, {MAX_SECONDS:g}]")
    return value


def _parser() -> Any:
    parser = tool_parser(__name__, __doc__, prog="cuda_ipc_top")
    parser.add_argument("--once", action="store_true", help="print one snapshot and exit")
    parser.add_argument("--json", action="store_true", help="print JSON (one object per snapshot) instead of the table")
    parser.add_argument("--period", type=_positive, default=1.0, help="seconds between two snapshots (default: 1)")
    parser.add_argument("--wait", type=_positive, default=DEFAULT_WAIT_S,
                        help="with --once: seconds to listen first, in which DDS finds every participant; then up to "
                             f"{MORE_WAIT_S:g} s more until every /diagnostics publisher found has been heard "
                             "(default: %(default)s)")
    return parser


def _spin_until(node: Any, deadline: float, done: Callable[[], bool] = lambda: False) -> None:
    """Take what arrives until ``deadline`` (monotonic) or until ``done()``."""
    import rclpy

    spin_until_stopped(lambda: rclpy.spin_once(node, timeout_sec=min(0.1, max(0.0, deadline - time.monotonic()))),
                       lambda: not done() and deadline - time.monotonic() > 0)


def watch(once: bool, as_json: bool, period: float, wait: float, ros_args: list[str]) -> int:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.signals import SignalHandlerOptions

    if isinstance(sys.stdout, io.TextIOWrapper):  # a terminal that cannot show a character gets its escape
        sys.stdout.reconfigure(errors="backslashreplace")
    rclpy.init(args=[sys.argv[0], *ros_args], signal_handler_options=SignalHandlerOptions.NO)  # run_tool's handlers
    node = rclpy.create_node("cuda_ipc_top")
    board = Board(stale_after=max(3.0, 3 * period))
    hearing = Hearing(board.add) if Hearing.supported() else None
    # Any: Jazzy's rclpy types a callback as taking the message only, Kilted's also (message, info), as Hearing does
    callback: Any = hearing or board.add
    node.create_subscription(DiagnosticArray, DIAGNOSTICS_TOPIC, callback, 50)
    live = sys.stdout.isatty() and not as_json
    try:
        started = time.monotonic()
        if once:
            _spin_until(node, started + wait)
            # Without message info (Humble's rclpy) there is no knowing who was heard: the whole bound.
            _spin_until(node, started + wait + MORE_WAIT_S,
                        lambda: hearing is not None and hearing.heard_every_publisher(node))
            rows = board.rows()
            print(render_screen(rows, as_json=as_json, live=False, now=time.time(), cut=board.cut), flush=True)
            return 0
        next_at = started + min(period, 1.5)
        while True:
            _spin_until(node, next_at)
            rows = board.rows()
            print(render_screen(rows, as_json=as_json, live=live, now=time.time(), cut=board.cut), flush=True)
            next_at += period
    finally:
        with teardown_bounded():
            node.destroy_node()
            rclpy.try_shutdown()


def main(argv: list[str] | None = None) -> None:
    args_in = list(sys.argv[1:] if argv is None else argv)
    split = args_in.index("--ros-args") if "--ros-args" in args_in else len(args_in)
    args = _parser().parse_args(args_in[:split])
    try:  # before rclpy.init: a malformed --ros-args is one line, exit code 2 (as every executable's)
        check_ros_arguments([sys.argv[0], *args_in[split:]])
    except RosArgumentsError as exc:
        print(f"cuda_ipc_top: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(run_tool(lambda: watch(args.once, args.json, args.period, args.wait, args_in[split:])))


if __name__ == "__main__":
    main()

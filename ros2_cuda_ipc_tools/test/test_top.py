"""cuda_ipc_top's board: statuses from /diagnostics joined per pool; others' statuses ignored; gone nodes dropped;
numbers that are not finite and hostile strings shown as such, never raw; --once against real reporting processes.

The fuzz of its input is test_fuzz_top.py; a real pipeline under top is in
ros2_cuda_ipc_examples/test/test_top_pipeline.py."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from peers import line_with

from ros2_cuda_ipc_tools.top import Board, printable, render_json, render_table
from ros2_cuda_ipc_tools.top.render import CLEAR

TOP = [sys.executable, "-m", "ros2_cuda_ipc_tools.top"]
PEER = str(Path(__file__).with_name("top_peer.py"))


def status(name: str, **values: object) -> DiagnosticStatus:
    return DiagnosticStatus(name=name, values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])


POOL = status("ros2_cuda_ipc pool: /cam/image", kind="pool", topic="/cam/image", node="/cam/camera", pid=100,
              pool_id="aa", memory="host", device="-", block_count=4, block_size=10, blocks_in_use=1,
              blocks_held_by_readers=2, blocks_free=1, published=50, rate_hz="30.0", acquire_misses=0)
READER = status("ros2_cuda_ipc reader: /cam/enc /cam/image", kind="reader", topic="/cam/image", node="/cam/enc",
                pid=200, reads=40, rate_hz="29.5", stale_drops=3, leases_held=2, latency_p50_ms="4.50",
                latency_p99_ms="9.00", pools="aa:2")
ORPHAN = status("ros2_cuda_ipc reader: /x/r /x/points", kind="reader", topic="/x/points", node="/x/r", pid=300,
                reads=0, rate_hz="0.0", stale_drops=0, leases_held=0, latency_p50_ms="-", latency_p99_ms="-", pools="")


def test_readers_join_the_pool_they_lease_from():
    board = Board()
    board.add(DiagnosticArray(status=[POOL, READER, ORPHAN, status("battery", level="ok")]), now=0.0)
    rows = board.rows(now=1.0)
    assert [row.topic for row in rows] == ["/cam/image", "/x/points"]
    image = rows[0]
    assert (image.publisher, image.pid, image.rate_hz, image.blocks_in_use, image.blocks_held, image.blocks_free) == \
        ("/cam/camera", 100, 30.0, 1, 2, 1)
    assert [(r.node, r.pid, r.leases) for r in image.readers] == [("/cam/enc", 200, 2)]
    assert image.stale_drops == 3 and image.latency_p50_ms == 4.5
    assert rows[1].publisher == "?" and rows[1].readers[0].latency_p50_ms is None
    table = render_table(rows)
    assert "/cam/camera (100)" in table and "200:2" in table and table.count("\n") == 2


def test_a_node_not_heard_from_drops_off():
    board = Board(stale_after=3.0)
    board.add(DiagnosticArray(status=[POOL]), now=0.0)
    board.add(DiagnosticArray(status=[READER]), now=2.5)
    assert [len(row.readers) for row in board.rows(now=4.0)] == [1]  # the pool went quiet, its reader did not
    assert board.rows(now=4.0)[0].publisher == "?"
    assert board.rows(now=6.0) == []
    assert render_table([]).startswith("no ros2_cuda_ipc pools or readers")


def test_once_json_with_nothing_running_prints_an_empty_board():
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_tools.top", "--once", "--json", "--wait", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    snapshot = json.loads(out.stdout)  # one JSON object, nothing else on stdout
    assert isinstance(snapshot["topics"], list) and snapshot["time"] > 0


def test_bad_arguments_are_refused_with_2():
    for args in (["--period", "0"], ["--period", "soon"], ["--bogus"], ["--wait", "inf"], ["--period", "1_0"]):
        out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_tools.top", *args], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (args, out.stderr)
        if args[0] != "--bogus":  # was "invalid _positive value: 'abc'"
            assert out.stderr.strip().endswith(f"argument {args[0]}: {args[1]!r} is not a number of seconds in "
                                               "(0, 86400]"), out.stderr


def test_numbers_are_ascii_decimal_digits_only():
    """Issue 35: int() and float() read "\u0661\u0662\u0663" as 123 and "1_000" as 1000; a report is not a Python literal."""
    pool = status("ros2_cuda_ipc pool: /n", kind="pool", topic="/n", node="/p", pid="\u0661\u0662\u0663", pool_id="aa",
                  blocks_in_use="1_000", blocks_free="\uff17", acquire_misses=" 7 ", rate_hz="2.5e1")
    board = Board()
    board.add(DiagnosticArray(status=[pool]), now=0.0)
    row = board.rows(now=0.0)[0]
    assert (row.pid, row.blocks_in_use, row.blocks_free, row.acquire_misses, row.rate_hz) == (None, None, None, 7, 25.0)


def test_a_snapshot_is_bounded_and_says_what_it_left_out():
    from rclpy.serialization import serialize_message
    from top_peer import crowd_array

    from ros2_cuda_ipc_tools.top.board import MAX_POOLS_PER_READER
    from ros2_cuda_ipc_tools.top.render import JSON_READERS, MAX_ROWS, TEXT_CHARS

    array = crowd_array(40, 150, "/r" + "\x01" * 1000)
    board = Board()
    board.add(array, now=0.0)
    rows = board.rows(now=0.0)
    assert board.cut == {"statuses": 0, "pools": 150 * (40 - MAX_POOLS_PER_READER)}
    text = render_json(rows, 1.0, board.cut)
    assert len(text) < 4 * len(serialize_message(array))  # 150 pools and readers: 305 KB made 139 MB of JSON
    snapshot = strict_json(text)
    joined = [row for row in snapshot["topics"] if row["readers"]]
    assert len(snapshot["topics"]) == 40 and len(joined) == MAX_POOLS_PER_READER  # the first 32 pools each reader named
    assert all(len(row["readers"]) == JSON_READERS and row["readers_not_shown"] == 150 - JSON_READERS for row in joined)
    assert joined[0]["readers"][0]["node"] == "/r" + "\x01" * (TEXT_CHARS - 2) + "..."
    assert snapshot["cut"] == {"rows": 0, "readers": MAX_POOLS_PER_READER * (150 - JSON_READERS),
                               "strings": MAX_POOLS_PER_READER * JSON_READERS, "statuses": 0,
                               "pools": 150 * (40 - MAX_POOLS_PER_READER)}
    table = render_table(rows, board.cut)
    assert table.splitlines()[-1] == f"not shown: {150 * (40 - MAX_POOLS_PER_READER)} pools readers named beyond " \
                                     f"{MAX_POOLS_PER_READER} each"
    assert len(table.splitlines()) == 1 + 40 + 1

    many = Board()
    many.add(crowd_array(600, 0, "/r"), now=0.0)
    rows = many.rows(now=0.0)
    assert len(rows) == 512 and many.cut == {"statuses": 88, "pools": 0}  # MAX_STATUSES kept
    assert strict_json(render_json(rows, 1.0, many.cut))["cut"]["rows"] == 512 - MAX_ROWS
    assert render_table(rows, many.cut).splitlines()[-1] == \
        f"not shown: {512 - MAX_ROWS} rows beyond the first {MAX_ROWS}, 88 statuses heard beyond the 512 kept"


def strict_json(text: str):
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_numbers_that_are_not_finite_are_shown_as_such_and_null_in_json():
    pool = status("ros2_cuda_ipc pool: /cam/image", kind="pool", topic="/cam/image", node="/cam/camera", pid="inf",
                  pool_id="aa", memory="host", rate_hz="nan", blocks_in_use="1e400", blocks_held_by_readers="-1e400",
                  blocks_free="9" * 5000, acquire_misses="2.5")
    reader = status("ros2_cuda_ipc reader: /cam/enc /cam/image", kind="reader", topic="/cam/image", node="/cam/enc",
                    pid=200, rate_hz="inf", stale_drops="nan", latency_p50_ms="inf", latency_p99_ms="1e400", pools="aa:inf")
    board = Board()
    board.add(DiagnosticArray(status=[pool, reader]), now=0.0)
    rows = board.rows(now=0.0)
    line = render_table(rows).splitlines()[1].split()
    # topic, publisher (pid), memory, rate, in use, held, free, stale, fallback, readers, p50
    assert line == ["/cam/image", "/cam/camera", "(inf)", "host", "nan", "inf", "-inf", "inf", "nan", "0", "200:inf", "inf"]
    row = strict_json(render_json(rows, 1.0))["topics"][0]
    assert row["pid"] is None and row["rate_hz"] is None and row["acquire_misses"] == 2.5
    assert row["nonfinite"] == {"pid": "inf", "rate_hz": "nan", "blocks_in_use": "inf", "blocks_held_by_readers": "-inf",
                                "blocks_free": "inf", "stale_drops": "nan", "latency_p50_ms": "inf"}
    assert row["readers"][0]["pid"] == 200 and row["readers"][0]["nonfinite"] == {
        "leases": "inf", "rate_hz": "inf", "stale_drops": "nan", "latency_p50_ms": "inf", "latency_p99_ms": "inf"}


def test_hostile_strings_are_escaped_and_forge_no_row():
    forged = "/cam\x1b[2J\x1b[31mPWNED\x1b[0m\n/fake  row"
    pool = status("ros2_cuda_ipc pool: x", kind="pool", topic=forged, node="/n\x9b2J\u202e", pid=1, pool_id="aa",
                  memory="host\r", device="0\x07")
    board = Board()
    board.add(DiagnosticArray(status=[pool]), now=0.0)
    table = render_table(board.rows(now=0.0))
    assert table.count("\n") == 1 and all(char.isprintable() for char in table.replace("\n", ""))
    assert "/cam\\x1b[2J\\x1b[31mPWNED\\x1b[0m\\n/fake  row" in table
    assert "/n\\x9b2J\\u202e (1)" in table and "host\\r:0\\x07" in table and printable("\t") == "\\t"
    assert strict_json(render_json(board.rows(now=0.0), 1.0))["topics"][0]["topic"] == forged  # JSON: the very string
    assert printable("a\\b") == "a\\\\b" and printable("x" * 500) == "x" * 120 + "..."


def test_two_pools_of_one_topic_each_keep_their_readers_in_one_order():
    second = status("ros2_cuda_ipc pool: /cam/image again", kind="pool", topic="/cam/image", node="/cam/camera2",
                    pid=101, pool_id="bb")
    both = status("ros2_cuda_ipc reader: /cam/all /cam/image", kind="reader", topic="/cam/image", node="/cam/all",
                  pid=201, pools="bb:1,aa:0")
    board = Board()
    board.add(DiagnosticArray(status=[second, both, READER, POOL]), now=0.0)
    rows = board.rows(now=0.0)
    assert [(row.publisher, [reader.node for reader in row.readers]) for row in rows] == [
        ("/cam/camera", ["/cam/all", "/cam/enc"]), ("/cam/camera2", ["/cam/all"])]
    assert [(reader.node, reader.leases) for reader in rows[0].readers] == [("/cam/all", 0), ("/cam/enc", 2)]


@pytest.fixture
def peers():
    started: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        peer = subprocess.Popen([sys.executable, PEER, *args], stdout=subprocess.PIPE, text=True)
        started.append(peer)
        line_with(peer.stdout, "ready")
        return peer

    yield start
    for peer in started:  # one at a time: all at once can meet Fast DDS 3.2's deletion deadlock (docs/decisions.md)
        peer.send_signal(signal.SIGTERM)
        peer.communicate(timeout=30)


def top_once(*args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([*TOP, "--once", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    return out


def rows_of(topic: str, snapshot: dict) -> list:
    """The snapshot's rows of ``topic`` (a DDS domain is random per run, and another run may share it)."""
    return [row for row in snapshot["topics"] if row["topic"] == topic]


@pytest.mark.timeout(120)
def test_once_shows_a_real_publisher_and_its_reader_in_text_and_json(peers):
    camera = peers("camera", "/top_smoke/image")
    reader = peers("reader", "/top_smoke/image")
    deadline, rows = time.monotonic() + 60, []
    while time.monotonic() < deadline:  # until both have been heard (DDS may take its time to find them)
        rows = rows_of("/top_smoke/image", strict_json(top_once("--json").stdout))
        if len(rows) == 1 and rows[0]["publisher"] != "?" and rows[0]["readers"]:
            break
    assert [(row["publisher"], row["pid"], row["memory"]) for row in rows] == [("/top_test_camera", camera.pid, "host")]
    assert [(entry["node"], entry["pid"]) for entry in rows[0]["readers"]] == [("/top_test_reader", reader.pid)]
    header, *lines = top_once().stdout.splitlines()
    assert header.startswith("topic  ") and header.split()[-2:] == ["p50", "ms"]
    assert [line for line in lines if line.startswith("/top_smoke/image ")] == [
        line for line in lines if f"/top_test_camera ({camera.pid})" in line and f" {reader.pid}:" in line], lines


@pytest.mark.timeout(120)
def test_once_waits_for_a_reporter_it_found_but_has_not_heard_yet(peers):
    """The issue's 2 readers of 3: --once printed before a reporter's first report had come. This reporter's first
    comes 5.5 s after top is started: after top's 3.5 s --wait unless top took 2 s to start, and well within the 3 s
    top waits on for a publisher it found (by 3 s: DDS announces a participant every 3 s) but has not heard."""
    from top_peer import LATE_NODE, LATE_TOPIC

    late = peers("late", "5.5")
    rows = rows_of(LATE_TOPIC, strict_json(top_once("--json").stdout))
    assert [[(reader["node"], reader["pid"]) for reader in row["readers"]] for row in rows] == [[(LATE_NODE, late.pid)]]


@pytest.mark.timeout(120)
def test_hostile_statuses_from_a_real_publisher_kill_no_view(peers):
    """Issue 28: one message of inf / 1e400 / nan, pools="aa:inf" and an escape-laden topic ended every view."""
    from top_peer import HOSTILE_TOPIC

    peers("hostile")
    deadline, rows = time.monotonic() + 60, []
    while not rows and time.monotonic() < deadline:
        rows = rows_of(HOSTILE_TOPIC, strict_json(top_once("--json").stdout))
    assert [(row["pid"], row["nonfinite"]["pid"], row["readers"][0]["nonfinite"]["leases"]) for row in rows] == [
        (None, "inf", "inf")]
    table = top_once().stdout
    assert "\x1b" not in table and "/cam\\x1b[2J\\x1b[31mPWNED\\x1b[0m\\n/fake  row" in table
    assert all(char.isprintable() for line in table.splitlines() for char in line)

    import pty

    screen, terminal = pty.openpty()  # the live view draws (clearing the screen) only on a terminal
    live = subprocess.Popen([*TOP], stdout=terminal, stderr=subprocess.PIPE, text=True)
    os.close(terminal)
    drawn, shown = b"", b"/cam\\x1b[2J\\x1b[31mPWNED"
    while shown not in drawn and live.poll() is None and time.monotonic() < deadline + 30:
        drawn += os.read(screen, 65536)  # redraws until one shows the hostile row (escaped)
    live.send_signal(signal.SIGINT)
    _, err = live.communicate(timeout=30)
    os.close(screen)
    assert live.returncode == 0 and "Traceback" not in err, err
    assert shown in drawn and b"\x1b" not in drawn.replace(CLEAR.encode(), b"")  # its own clears, nothing else


@pytest.mark.timeout(120)
def test_once_prints_a_bounded_snapshot_of_a_crowd_from_a_real_publisher(peers):
    """Issue 35: a 647 KB /diagnostics message of readers that each name every pool gave a 14.9 MB line in 10.2 s."""
    import resource

    peers("crowd", "200", "200")
    deadline, rows, snapshot = time.monotonic() + 60, [], {}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    while not rows and time.monotonic() < deadline:
        out = top_once("--json").stdout
        snapshot = strict_json(out)
        rows = [row for row in snapshot["topics"] if row["topic"].startswith("/crowd/")]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\ntop --once --json on a crowd: {len(out)} bytes, cut {snapshot['cut']}, "
          f"{used.ru_utime + used.ru_stime - before.ru_utime - before.ru_stime:.1f} s of CPU")
    assert len(out) < 1 << 20 and snapshot["cut"]["pools"] == 200 * (200 - 32) and snapshot["cut"]["rows"] > 0, \
        snapshot["cut"]
    assert snapshot["cut"]["strings"] > 0 and snapshot["cut"]["readers"] > 0
    assert top_once().stdout.splitlines()[-1].startswith("not shown: ")


def test_a_reader_made_without_node_has_its_latency_reported_by_its_readers_report(node):
    """Issue 36: inference reads through a TensorReader made without node=, sharing its reporting ImageReader's
    Reader: the report counted its reads but never its latency (latency_p50_ms: null)."""
    import numpy as np

    from ros2_cuda_ipc_core import DiagnosticsReporter, read_status
    from ros2_cuda_ipc_image import ImageReader
    from ros2_cuda_ipc_tensor import TensorPublisher, TensorReader

    with TensorPublisher(node, "top_latency_tensors", shape=(1, 3, 4, 4), dtype=np.float32, memory="host") as pub:
        reporting = ImageReader(node=node, topic="top_latency_tensors")
        try:
            tensors = TensorReader(reporting.reader)
            from std_msgs.msg import Header

            header = Header(stamp=node.get_clock().now().to_msg())
            header.stamp.sec -= 2  # stamped two seconds ago: about 2000 ms from the stamp
            msg = pub.publish_array(np.zeros((1, 3, 4, 4), np.float32), header=header)
            with tensors.read(msg):
                pass
            (report,) = [read_status(s) for s in DiagnosticsReporter.for_node(node).statuses()
                         if s.name.startswith("ros2_cuda_ipc reader")]
        finally:
            reporting.close()
    assert report.count("reads") == 1 and 2000 <= report.number("latency_p50_ms") < 60_000


@pytest.mark.timeout(120)
def test_once_shows_the_latency_of_a_reader_made_without_node(peers):
    camera = peers("tensor-camera", "/top_tensors/preprocessed")
    reader = peers("tensors", "/top_tensors/preprocessed")
    deadline, readers = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        rows = rows_of("/top_tensors/preprocessed", strict_json(top_once("--json").stdout))
        readers = [entry for row in rows for entry in row["readers"]]
        if readers and readers[0]["latency_p50_ms"] is not None and rows[0]["pid"] == camera.pid:
            break
    assert [(entry["node"], entry["pid"]) for entry in readers] == [("/top_test_tensors", reader.pid)]
    assert readers[0]["latency_p50_ms"] >= 0, readers  # was null: the TensorReader's reads were never stamped

"""Property-based fuzz of cuda_ipc_top's input: any DDS participant may publish on /diagnostics.

Hypothesis makes ``DiagnosticArray`` messages of our statuses and others: non-finite and out-of-range numbers,
huge strings, control characters and escape sequences in names, keys, values and hardware ids, numbers that
are not numbers, missing keys, duplicate keys, readers joining pools that are and are not there. Each goes
through real CDR to the board, then to every view: the live screen, the --once table and the JSON. Nothing
raises; no character a terminal acts on reaches the output but the live view's own clear; no row is forged
(one line per row); the JSON parses strictly, a non-finite number being null and named in ``nonfinite``.
"""

import collections
import json

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from fuzz_invariant import over_the_wire
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_cost import measure
from rclpy.serialization import serialize_message

from ros2_cuda_ipc_core import STATUS_PREFIX
from ros2_cuda_ipc_core.node.diagnostics_format import POOL_KEYS, READER_KEYS
from ros2_cuda_ipc_tools.top import Board, render_screen
from ros2_cuda_ipc_tools.top.board import MAX_POOLS_PER_READER
from ros2_cuda_ipc_tools.top.render import CLEAR, MAX_ROWS, cut_note

TRIED: collections.Counter = collections.Counter()

#: Pure Python and milliseconds an example: more examples than the fuzzes that read blocks.
FUZZ_TOP = settings(max_examples=300, deadline=None)

POOL_IDS = ["aa", "bb", "0" * 32]
NUMBERS = st.one_of(
    st.sampled_from(["inf", "-inf", "+Infinity", "nan", "NaN", "-nan", "1e400", "-1e400", "1e30", "9" * 25, "-" + "9" * 19,
                     "2.5", "-3", "0", "", "-", "0x1f", "1_000", " 7 ", "\u0661\u0662", "12abc", "1e-400"]),
    st.integers().map(str), st.floats().map(repr))
HOSTILE = st.one_of(
    st.text(max_size=30),  # every code point but surrogates: C0, DEL, C1, bidirectional overrides, separators
    st.sampled_from(["/cam\x1b[2J\x1b[31mPWNED\x1b[0m\n/fake  row", "\x9b2J", "\u202e/cam", "a\u2028b\u2029c", "\r/x",
                     "\x1b]0;title\x07", "\\x1b", "\t", "/cam/image", "?", "-"]),
    st.builds(lambda text, n: text * n, st.sampled_from(["\x1b[2J", "a", "\n", "\u00e9", "\u202e"]),
              st.integers(1_000, 60_000)))
VALUE = st.one_of(NUMBERS, HOSTILE)
POOLS = st.one_of(
    st.lists(st.tuples(st.one_of(st.sampled_from(POOL_IDS), HOSTILE), VALUE), max_size=6).map(
        lambda pairs: ",".join(f"{pool_id}:{held}" for pool_id, held in pairs)),
    HOSTILE)
KNOWN_KEYS = st.sampled_from(sorted((set(POOL_KEYS) | set(READER_KEYS)) - {"kind"}))


def mostly(usual: st.SearchStrategy, hostile: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly ``usual``, so that statuses get onto the board; otherwise ``hostile``."""
    return st.one_of(usual, usual, usual, hostile)


@st.composite
def statuses(draw: st.DrawFn) -> DiagnosticStatus:
    kind = draw(mostly(st.sampled_from(["pool", "reader"]), HOSTILE))
    pairs = [("kind", kind)] if draw(st.booleans()) or kind in ("pool", "reader") else []
    pairs += draw(st.lists(st.tuples(KNOWN_KEYS, mostly(NUMBERS, HOSTILE)), max_size=10))
    pairs += draw(st.lists(st.tuples(HOSTILE, VALUE), max_size=2))
    if draw(st.booleans()):
        pairs.append(("pool_id", draw(st.sampled_from(POOL_IDS))))
    if draw(st.booleans()):
        pairs.append(("pools", draw(POOLS)))
    pairs = draw(st.permutations(pairs))  # duplicate keys too: the last one counts
    name = draw(mostly(HOSTILE.map(lambda text: STATUS_PREFIX + text), HOSTILE))
    return DiagnosticStatus(level=bytes([draw(st.integers(0, 255))]), name=name, message=draw(HOSTILE),
                            hardware_id=draw(HOSTILE), values=[KeyValue(key=k, value=v) for k, v in pairs])


def refuse_constant(name: str) -> None:
    raise ValueError(f"not strict JSON: {name}")


def raw_characters(text: str) -> list[str]:
    """Characters of ``text`` a terminal could act on, but the line breaks between rows."""
    return [char for char in text if not char.isprintable() and char != "\n"]


@FUZZ_TOP
@given(arrays=st.lists(st.lists(statuses(), max_size=5), min_size=1, max_size=2), now=st.sampled_from([0.5, 2.9, 3.5]))
def test_fuzzed_diagnostics_never_raise_nor_reach_the_terminal_raw(arrays, now):
    TRIED["inputs"] += 1
    board = Board(stale_after=3.0)
    for when, statuses_of_one in enumerate(arrays):
        board.add(over_the_wire(DiagnosticArray(status=statuses_of_one)), now=float(when))
    rows = board.rows(now=now)

    live = render_screen(rows, as_json=False, live=True, now=1.0)
    assert live.startswith(CLEAR) and not raw_characters(live[len(CLEAR):]), raw_characters(live[len(CLEAR):])[:5]
    table = render_screen(rows, as_json=False, live=False, now=1.0, cut=board.cut)  # --once, the live view elsewhere
    note = cut_note({**board.cut, "rows": max(0, len(rows) - MAX_ROWS)})
    lines = min(len(rows), MAX_ROWS) + bool(note)  # one line a row, and one saying what was left out
    assert not raw_characters(table) and table.count("\n") == (lines if rows else bool(note)), (lines, note)

    text = render_screen(rows, as_json=True, live=False, now=1.0, cut=board.cut)
    assert text.isascii() and "\n" not in text and not raw_characters(text)
    snapshot = json.loads(text, parse_constant=refuse_constant)
    assert len(snapshot["topics"]) == min(len(rows), MAX_ROWS) and snapshot["cut"]["rows"] == len(rows) - len(snapshot["topics"])
    for topic in snapshot["topics"]:
        for record in (topic, *topic["readers"]):
            for field, was in record["nonfinite"].items():
                assert record[field] is None and was in ("inf", "-inf", "nan"), (field, was)
                TRIED["nonfinite fields"] += 1
    TRIED["rows"] += len(rows)


@st.composite
def crowds(draw: st.DrawFn) -> DiagnosticArray:
    """Many pools, and readers that each name many of them (each pool named makes the reader an entry of its row):
    the shape of issue 35's 647 KB message that made a 14.9 MB snapshot."""
    pool_count, reader_count = draw(st.integers(1, 120)), draw(st.integers(0, 120))
    node = draw(st.one_of(st.just("/r"), HOSTILE))
    pools = [DiagnosticStatus(name=f"{STATUS_PREFIX}pool: {i}", values=[
        KeyValue(key="kind", value="pool"), KeyValue(key="topic", value=f"/t{i % 7}"), KeyValue(key="pid", value=str(i)),
        KeyValue(key="pool_id", value=f"{i:x}")]) for i in range(pool_count)]
    named = ",".join(f"{i:x}:1" for i in range(draw(st.integers(0, pool_count))))
    readers = [DiagnosticStatus(name=f"{STATUS_PREFIX}reader: {j}", values=[
        KeyValue(key="kind", value="reader"), KeyValue(key="node", value=node), KeyValue(key="pid", value=str(j)),
        KeyValue(key="pools", value=named)]) for j in range(reader_count)]
    return DiagnosticArray(status=pools + readers)


COST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


@COST
@given(array=st.one_of(crowds(), st.lists(statuses(), max_size=8).map(lambda s: DiagnosticArray(status=s))))
def test_a_snapshot_costs_and_prints_at_most_a_constant_times_its_input(array):
    """Issue 35's rule for top: a snapshot's CPU time, tracemalloc peak and printed size are bounded by a constant
    times the /diagnostics message's size (it was 14.9 MB of JSON in 10.2 s from 647 KB)."""
    size = len(serialize_message(array))
    received = over_the_wire(array)

    def snapshot() -> tuple[str, str]:
        board = Board()
        board.add(received, now=0.0)
        rows = board.rows(now=0.0)
        return (render_screen(rows, as_json=True, live=False, now=1.0, cut=board.cut),
                render_screen(rows, as_json=False, live=False, now=1.0, cut=board.cut))

    (text, table), cost = measure(snapshot)
    # A reader joins up to MAX_POOLS_PER_READER rows: each byte of it may be an entry 32 times over.
    cost.assert_within(size, f"a snapshot of {len(array.status)} statuses", peak_per_byte=8 * MAX_POOLS_PER_READER)
    assert len(text) <= 64 * size + 64 * 1024 and len(table) <= 64 * size + 64 * 1024, (size, len(text), len(table))
    TRIED["cost examples"] += 1
    TRIED["cut examples"] += bool(json.loads(text)["cut"]["readers"] or json.loads(text)["cut"]["pools"])


def test_the_fuzz_tried_its_inputs():
    """How much the fuzz above tried (``pytest -s`` prints it); it made rows, not only noise.  (Whether a draw held
    a non-finite field is chance: one loaded run drew none in 300; those have tests of their own in test_top.py.)"""
    print(f"\ncuda_ipc_top fuzz: {dict(TRIED)}")
    assert TRIED["inputs"] >= FUZZ_TOP.max_examples and TRIED["rows"] > 0, TRIED
    assert TRIED["cost examples"] >= COST.max_examples and TRIED["cut examples"] > 0, TRIED

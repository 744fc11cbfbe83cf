"""How ``top`` shows its board: a fixed-width text table, or strict JSON.

Everything on the board came from whichever DDS participant published it.  So every string is escaped
before it reaches a terminal (a topic name cannot clear the screen or forge a row) and cut to a cell's
width; a number that is not finite is shown as such (``inf``, ``-inf``, ``nan``; ``-`` where there is none);
and the JSON is strict: a non-finite number is ``null``, and the object's ``nonfinite`` names its field
with what it was.  Both are bounded whatever was sent: at most ``MAX_ROWS`` rows, ``JSON_READERS`` readers a row
in JSON, strings cut to ``CELL_CHARS`` (table) or ``TEXT_CHARS`` (JSON) characters; what was left out is said, in
the table's last line and in the JSON's ``cut`` object.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ros2_cuda_ipc_core import ReportedCount

from .board import MAX_POOLS_PER_READER, MAX_STATUSES, ReaderEntry, TopicRow

__all__ = ["CLEAR", "COLUMNS", "MAX_ROWS", "cut_note", "number_text", "printable", "render_json", "render_screen",
           "render_table"]

#: What the live view writes before each table: the cursor home, the screen cleared (the only escape top writes).
CLEAR = "\x1b[H\x1b[2J"

COLUMNS = ("topic", "publisher", "memory", "rate/s", "in use", "held", "free", "stale", "fallback",
           "readers (pid:leases)", "p50 ms")
#: Characters of one string a cell shows (longer ones end in "..."): a topic name is far shorter.
CELL_CHARS = 120
#: Readers a row lists by pid before it says how many more there are.
READERS_SHOWN = 8
#: Rows a snapshot shows (by topic); the rest are counted in its ``cut``.
MAX_ROWS = 64
#: Readers a JSON row lists (its ``readers_not_shown`` says how many more), and characters of a JSON string.
JSON_READERS = 16
TEXT_CHARS = 128

#: What ``cut`` counts, in the words of the table's last line.
_CUT_WORDS = {"rows": f"rows beyond the first {MAX_ROWS}", "readers": f"readers beyond {JSON_READERS} a row",
              "strings": f"strings cut to {TEXT_CHARS} characters",
              "statuses": f"statuses heard beyond the {MAX_STATUSES} kept",
              "pools": f"pools readers named beyond {MAX_POOLS_PER_READER} each"}


def printable(text: str, limit: int = CELL_CHARS) -> str:
    """``text`` as a terminal may show it: every character a terminal could act on (control characters and so
    escape sequences, bidirectional and line separators, surrogates: what ``str.isprintable`` refuses) and every
    backslash written as its Python escape, and at most ``limit`` characters of ``text``."""
    if len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(char if char.isprintable() and char != "\\" else _escaped(char) for char in text)


_SHORT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def number_text(value: ReportedCount, digits: int | None = None) -> str:
    """A reported number for a cell: ``-`` for none, ``inf`` / ``-inf`` / ``nan`` as such, ``digits`` decimals."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    if digits is None or abs(value) >= 1e15:
        return f"{value:.6g}"
    return f"{value:.{digits}f}"


def _readers_cell(readers: list[ReaderEntry]) -> str:
    shown = " ".join(f"{number_text(reader.pid)}:{number_text(reader.leases)}" for reader in readers[:READERS_SHOWN])
    more = len(readers) - READERS_SHOWN
    return f"{shown} (+{more} more)" if more > 0 else shown or "-"


def _cells(row: TopicRow) -> tuple[str, ...]:
    memory = printable(row.memory) if row.device in ("-", "") else f"{printable(row.memory)}:{printable(row.device)}"
    publisher = printable(row.publisher) if row.pid is None else f"{printable(row.publisher)} ({number_text(row.pid)})"
    return (printable(row.topic), publisher, memory, number_text(row.rate_hz, 1), number_text(row.blocks_in_use),
            number_text(row.blocks_held), number_text(row.blocks_free), number_text(row.stale_drops),
            number_text(row.fallback_frames), _readers_cell(row.readers), number_text(row.latency_p50_ms, 1))


def cut_note(cut: Mapping[str, int]) -> str:
    """One line saying what a snapshot left out (``""`` when nothing was)."""
    parts = [f"{count} {_CUT_WORDS.get(what, what)}" for what, count in cut.items() if count]
    return f"not shown: {', '.join(parts)}" if parts else ""


def _shown(rows: list[TopicRow], cut: Mapping[str, int] | None) -> tuple[list[TopicRow], Counter[str]]:
    """The rows a snapshot shows, and what is left out: the board's ``cut`` plus the rows beyond ``MAX_ROWS``."""
    counts: Counter[str] = Counter({"rows": 0, "readers": 0, "strings": 0, "statuses": 0, "pools": 0})
    counts.update(cut or {})
    counts["rows"] += max(0, len(rows) - MAX_ROWS)
    return rows[:MAX_ROWS], counts


def render_table(rows: list[TopicRow], cut: Mapping[str, int] | None = None) -> str:
    """The board as a fixed-width text table, one line per pool (nothing in it a terminal acts on), and a last line
    saying what was left out, if anything (``cut``: the board's :attr:`~.board.Board.cut`)."""
    rows, counts = _shown(rows, cut)
    note = cut_note(counts)
    if not rows:
        return "\n".join(filter(None, ["no ros2_cuda_ipc pools or readers heard on /diagnostics", note]))
    cells = [COLUMNS, *map(_cells, rows)]
    widths = [max(len(line[column]) for line in cells) for column in range(len(COLUMNS))]
    lines = ["  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip() for line in cells]
    return "\n".join([*lines, note] if note else lines)


def _strict(record: dict[str, Any], counts: Counter[str]) -> dict[str, Any]:
    """``record`` with every non-finite number ``null``, named in ``nonfinite`` with what it was, every string cut to
    ``TEXT_CHARS`` (counted in ``counts``); lists of records alike."""
    strict: dict[str, Any] = {}
    nonfinite: dict[str, str] = {}
    for key, value in record.items():
        if isinstance(value, float) and not math.isfinite(value):
            strict[key], nonfinite[key] = None, number_text(value)
        elif isinstance(value, str) and len(value) > TEXT_CHARS:
            strict[key] = value[:TEXT_CHARS] + "..."
            counts["strings"] += 1
        elif isinstance(value, list):
            strict[key] = [_strict(item, counts) if isinstance(item, dict) else item for item in value]
        else:
            strict[key] = value
    strict["nonfinite"] = nonfinite
    return strict


def _json_row(row: TopicRow, counts: Counter[str]) -> dict[str, Any]:
    record = row.as_json(readers=JSON_READERS)
    record["readers_not_shown"] = max(0, len(row.readers) - JSON_READERS)
    counts["readers"] += record["readers_not_shown"]
    return _strict(record, counts)


def render_json(rows: list[TopicRow], now: float, cut: Mapping[str, int] | None = None) -> str:
    """The board as one line of strict JSON (ASCII: every other character escaped), taken at ``now`` (Unix time);
    its ``cut`` counts what was left out (``cut``: the board's :attr:`~.board.Board.cut`)."""
    rows, counts = _shown(rows, cut)
    topics = [_json_row(row, counts) for row in rows]
    return json.dumps({"time": now, "topics": topics, "cut": dict(counts)}, allow_nan=False)


def render_screen(rows: list[TopicRow], *, as_json: bool, live: bool, now: float,
                  cut: Mapping[str, int] | None = None) -> str:
    """What one snapshot prints: strict JSON, the table, or (``live``: on a terminal) the table on a cleared screen."""
    if as_json:
        return render_json(rows, now, cut)
    return f"{CLEAR}{render_table(rows, cut)}" if live else render_table(rows, cut)

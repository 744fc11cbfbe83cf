"""How ``top`` shows its board: a fixed-width text table, or strict JSON.

Everything on the board came from whichever DDS participant published it.  So every string is escaped
before it reaches a terminal (a topic name cannot clear the screen or forge a row) and cut to a cell's
width; a number that is not finite is shown as such (``inf``, ``-inf``, ``nan``; ``-`` where there is none);
and the JSON is strict: a non-finite number is ``null``, and the object's ``nonfinite`` names its field
with what it was.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ros2_cuda_ipc_core import ReportedCount

from .board import ReaderEntry, TopicRow

__all__ = ["CLEAR", "COLUMNS", "number_text", "printable", "render_json", "render_screen", "render_table"]

#: What the live view writes before each table: the cursor home, the screen cleared (the only escape top writes).
CLEAR = "\x1b[H\x1b[2J"

COLUMNS = ("topic", "publisher", "memory", "rate/s", "in use", "held", "free", "stale", "fallback",
           "readers (pid:leases)", "p50 ms")
#: Characters of one string a cell shows (longer ones end in "..."): a topic name is far shorter.
CELL_CHARS = 120
#: Readers a row lists by pid before it says how many more there are.
READERS_SHOWN = 8


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


def render_table(rows: list[TopicRow]) -> str:
    """The board as a fixed-width text table, one line per pool (nothing in it a terminal acts on)."""
    if not rows:
        return "no ros2_cuda_ipc pools or readers heard on /diagnostics"
    cells = [COLUMNS, *map(_cells, rows)]
    widths = [max(len(line[column]) for line in cells) for column in range(len(COLUMNS))]
    return "\n".join("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
                     for line in cells)


def _strict(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with every non-finite number ``null``, named in ``nonfinite`` with what it was; lists of records
    alike."""
    strict: dict[str, Any] = {}
    nonfinite: dict[str, str] = {}
    for key, value in record.items():
        if isinstance(value, float) and not math.isfinite(value):
            strict[key], nonfinite[key] = None, number_text(value)
        elif isinstance(value, list):
            strict[key] = [_strict(item) if isinstance(item, dict) else item for item in value]
        else:
            strict[key] = value
    strict["nonfinite"] = nonfinite
    return strict


def render_json(rows: list[TopicRow], now: float) -> str:
    """The board as one line of strict JSON (ASCII: every other character escaped), taken at ``now`` (Unix time)."""
    return json.dumps({"time": now, "topics": [_strict(row.as_json()) for row in rows]}, allow_nan=False)


def render_screen(rows: list[TopicRow], *, as_json: bool, live: bool, now: float) -> str:
    """What one snapshot prints: strict JSON, the table, or (``live``: on a terminal) the table on a cleared screen."""
    if as_json:
        return render_json(rows, now)
    return f"{CLEAR}{render_table(rows)}" if live else render_table(rows)

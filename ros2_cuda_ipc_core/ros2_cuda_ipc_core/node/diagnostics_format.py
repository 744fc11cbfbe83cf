"""What a ros2_cuda_ipc status on ``/diagnostics`` says, written and read back in one place.

:mod:`.diagnostics` writes the values; :func:`read_status` is how a tool (``cuda_ipc_top``) reads them.
Any DDS participant can publish on ``/diagnostics``, so reading trusts nothing: a number that is not one is
None, ``inf``, ``1e400`` and ``nan`` stay the floats they are (a display shows them as such; nothing here
converts them to an integer), and no value is sized into an allocation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NO_VALUE", "POOL_KEYS", "READER_KEYS", "REPORT_PERIOD_S", "STATUS_KINDS", "STATUS_PREFIX",
           "ReportedCount", "ReportedStatus", "format_leases", "parse_leases", "read_status", "reported_count",
           "reported_number"]

#: Every status this project publishes is named ``"ros2_cuda_ipc <kind>: <topic or node>"``.
STATUS_PREFIX = "ros2_cuda_ipc "
STATUS_KINDS = ("pool", "reader")
#: Seconds between two reports of one node.
REPORT_PERIOD_S = 1.0
POOL_KEYS = ("kind", "topic", "node", "pid", "pool_id", "memory", "device", "block_count", "block_size",
             "blocks_in_use", "blocks_held_by_readers", "blocks_free", "published", "rate_hz", "acquire_misses",
             "fd_handouts", "refused_peers")
READER_KEYS = ("kind", "topic", "node", "pid", "reads", "rate_hz", "stale_drops", "invalid_descriptors",
               "unavailable", "fallback_frames", "leases_held", "latency_p50_ms", "latency_p99_ms", "pools")
#: A number with no value yet (a latency before the first frame).
NO_VALUE = "-"

#: A count as reported: an int when it is one (within int64), else the float it parses to (maybe not finite).
ReportedCount = int | float | None

_INT64 = 2**63
_INT64_DIGITS = 20  # longer text never goes through int(): its cost grows with the square of the length
#: What a number may be written as: ASCII decimal digits only (Python's float() and int() also take "1_000" and
#: other scripts' digits, "\u0661\u0662\u0663" being 123), maybe signed, with a fraction and an exponent; or inf / nan.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)",
                      re.ASCII | re.IGNORECASE)
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_SPACES = " \t\n\r\f\v"


def reported_number(text: str | None) -> float | None:
    """The float ``text`` says in ASCII decimal (``inf``, ``-inf`` and ``nan`` included); None when absent or not a
    number so written."""
    if text is None or text == NO_VALUE:
        return None
    text = text.strip(_SPACES)
    return float(text) if _DECIMAL.fullmatch(text) else None


def reported_count(text: str | None) -> ReportedCount:
    """The integer ``text`` says in ASCII digits, or, when it is no integer within int64, the float it parses to."""
    digits = None if text is None else text.strip(_SPACES)
    if digits is not None and len(digits) <= _INT64_DIGITS and _INTEGER.fullmatch(digits):
        value = int(digits)
        if -_INT64 <= value < _INT64:
            return value
    number = reported_number(text)
    if number is not None and math.isfinite(number) and number.is_integer() and -_INT64 <= number < _INT64:
        return int(number)
    return number


def format_leases(leases: Mapping[str, int]) -> str:
    """A reader's ``pools`` value: ``pool_id:leases`` pairs, comma-separated (pool ids in hex)."""
    return ",".join(f"{pool_id}:{held}" for pool_id, held in leases.items())


def parse_leases(text: str) -> dict[str, ReportedCount]:
    """A ``pools`` value back as {pool id: leases held}; a pair without a number holds None."""
    leases: dict[str, ReportedCount] = {}
    for pair in filter(None, text.split(",")):
        pool_id, _, held = pair.partition(":")
        leases[pool_id] = reported_count(held)
    return leases


@dataclass(frozen=True)
class ReportedStatus:
    """One ros2_cuda_ipc status as heard: its name, ``kind`` (``pool`` or ``reader``) and values, unchecked
    strings, read through the typed accessors."""

    name: str
    kind: str
    values: Mapping[str, str]

    def text(self, key: str, default: str = "?") -> str:
        """The value of ``key`` as sent (not escaped: a display escapes it), ``default`` when absent or empty."""
        return self.values.get(key) or default

    def number(self, key: str) -> float | None:
        return reported_number(self.values.get(key))

    def count(self, key: str) -> ReportedCount:
        return reported_count(self.values.get(key))

    def leases(self) -> dict[str, ReportedCount]:
        """A reader's leases held, by pool id (hex)."""
        return parse_leases(self.values.get("pools", ""))


def read_status(status: Any) -> ReportedStatus | None:
    """A ``DiagnosticStatus`` as a :class:`ReportedStatus` when it is ours (its name and ``kind`` say so), else None."""
    name = status.name
    if not name.startswith(STATUS_PREFIX):
        return None
    values = {pair.key: pair.value for pair in status.values}
    kind = values.get("kind", "")
    return ReportedStatus(name, kind, values) if kind in STATUS_KINDS else None

"""A report's signature: how the pipeline runner tells its own nodes' reports from anyone else's.

``pipeline_stats`` is a DDS topic: any participant in the domain can publish there, and a report's ``pid`` and
``node`` fields are only what the sender wrote.  The runner hands each process it starts a fresh random key in
the environment (:data:`REPORT_KEY_VARIABLE`, readable only by the same user through ``/proc``); a node started
with one appends ``"signature": HMAC-SHA256(key, report)`` as the JSON object's last member, and the runner
accepts only reports whose signature checks.  Other readers (``ros2 topic echo``, tests) see one more field.
"""

from __future__ import annotations

import hashlib
import hmac
import os

__all__ = ["REPORT_KEY_VARIABLE", "new_report_key", "report_key_from_environment", "sign_report", "signed_body"]

#: The environment variable that carries a run's key (hex) to the nodes it starts.
REPORT_KEY_VARIABLE = "ROS2_CUDA_IPC_REPORT_KEY"
_KEY_BYTES = 32
_DIGEST_HEX = 64
_PREFIX = ', "signature": "'
_SUFFIX = '"}'
_TAIL = len(_PREFIX) + _DIGEST_HEX + len(_SUFFIX)


def new_report_key() -> bytes:
    return os.urandom(_KEY_BYTES)


def report_key_from_environment() -> bytes | None:
    """This process's key, when a runner started it with one (anything but 64 hex digits: none)."""
    text = os.environ.get(REPORT_KEY_VARIABLE, "")
    if len(text) != 2 * _KEY_BYTES:
        return None
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None


def _digest(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def sign_report(body: str, key: bytes) -> str:
    """``body`` (a JSON object's text, with at least one member) with its signature as the last member."""
    if not body.endswith("}") or body.rstrip("}").rstrip().endswith("{"):
        raise ValueError("a report to sign is a JSON object with members")
    return body[:-1] + _PREFIX + _digest(key, body) + _SUFFIX


def signed_body(data: str, key: bytes) -> str | None:
    """The report ``data`` without its signature if ``key`` signed it, else None.  A fixed-size tail is compared:
    the cost is one HMAC over the input, whatever it holds."""
    if len(data) <= _TAIL or not data.endswith(_SUFFIX) or data[-_TAIL:-_TAIL + len(_PREFIX)] != _PREFIX:
        return None
    body = data[:-_TAIL] + "}"
    given = data[-_TAIL + len(_PREFIX):-len(_SUFFIX)]
    matches = hmac.compare_digest(given.encode("utf-8", "surrogatepass"), _digest(key, body).encode())
    return body if matches else None

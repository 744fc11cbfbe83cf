"""Test support (not shipped): the two roles of a peer script as real processes.

A peer script takes ``publisher`` or ``subscriber`` and its arguments, and prints one JSON line last.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def last_json(text: str) -> Any:
    """The last line a peer printed, parsed."""
    return json.loads(text.strip().splitlines()[-1])


def run_publisher_and_subscriber(script: str, *args: str, publisher_timeout: float = 240.0,
                                 subscriber_timeout: float = 60.0) -> tuple[Any, Any]:
    """Start the subscriber, then the publisher; return their JSON results (publisher's, subscriber's)."""
    sub = subprocess.Popen([sys.executable, script, "subscriber", *args], stdout=subprocess.PIPE, text=True)
    pub = subprocess.Popen([sys.executable, script, "publisher", *args], stdout=subprocess.PIPE, text=True)
    try:
        pub_out, _ = pub.communicate(timeout=publisher_timeout)
        sub_out, _ = sub.communicate(timeout=subscriber_timeout)
    finally:
        pub.kill()
        sub.kill()
    return last_json(pub_out), last_json(sub_out)

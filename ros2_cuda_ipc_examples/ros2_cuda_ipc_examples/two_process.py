"""Examples that run as two processes of one script: ``--role subscriber`` and ``--role publisher``.

Each role prints one JSON line at the end; the orchestrating invocation starts both and reads them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any


def add_role_argument(parser: argparse.ArgumentParser, main_role: str) -> None:
    parser.add_argument("--role", choices=[main_role, "publisher", "subscriber"], default=main_role,
                        help="internal: which process of the example this is")


def dispatch(args: argparse.Namespace, publisher: Callable[[Any], None], subscriber: Callable[[Any], None],
             orchestrate: Callable[[Any], int]) -> None:
    if args.role == "publisher":
        publisher(args)
    elif args.role == "subscriber":
        subscriber(args)
    else:
        raise SystemExit(orchestrate(args))


def run_roles(script: str, argv: list[str], timeout: float) -> tuple[dict | None, dict | None, int, int]:
    """Start the subscriber, then the publisher; return (publisher JSON, subscriber JSON, their pids)."""
    base = [sys.executable, script, *argv]
    subscriber = subprocess.Popen([*base, "--role", "subscriber"], stdout=subprocess.PIPE, text=True)
    publisher = subprocess.Popen([*base, "--role", "publisher"], stdout=subprocess.PIPE, text=True)
    try:
        pub_out, _ = publisher.communicate(timeout=timeout)
        sub_out, _ = subscriber.communicate(timeout=60)
    finally:
        publisher.kill()
        subscriber.kill()

    def last_json(proc: subprocess.Popen, out: str) -> dict | None:
        lines = out.strip().splitlines()
        return json.loads(lines[-1]) if proc.returncode == 0 and lines else None

    return last_json(publisher, pub_out), last_json(subscriber, sub_out), publisher.pid, subscriber.pid

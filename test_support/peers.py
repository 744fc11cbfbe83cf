"""Test support (not shipped): peer scripts, the real processes of multi-process tests, from both ends.

A peer script is ``script ROLE ARGS...``: :func:`play` runs the named role, which may print lines of its
own and returns what it prints last, as one JSON line. The test starts peers with :func:`spawn_peer` (and
talks to one line by line with :func:`ask`), or runs subscribers and a publisher to the end with
:func:`run_peers` and reads their last lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any


def last_json(text: str) -> Any:
    """The last line a peer printed, parsed."""
    return json.loads(text.strip().splitlines()[-1])


def spawn_peer(script: str, *args: str, stdin: bool = False) -> subprocess.Popen:
    """``script`` started with ``args``, its stdout (and, with ``stdin``, its stdin) a text pipe."""
    return subprocess.Popen([sys.executable, script, *args], stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.PIPE if stdin else None)


def ask(peer: subprocess.Popen, line: str) -> Any:
    """Send a peer started with ``stdin=True`` one line; its one-line JSON answer."""
    peer.stdin.write(line + "\n")
    peer.stdin.flush()
    return json.loads(peer.stdout.readline())


def run_peers(script: str, publisher: Sequence[str], subscribers: Sequence[Sequence[str]],
              publisher_timeout: float = 240.0, subscriber_timeout: float = 60.0) -> tuple[Any, list[Any]]:
    """Start every subscriber, then the publisher (each its command-line arguments); once the publisher is done
    and has exited 0, the JSON results: the publisher's, and the subscribers' in order."""
    subs = [spawn_peer(script, *args) for args in subscribers]
    pub = spawn_peer(script, *publisher)
    try:
        pub_out, _ = pub.communicate(timeout=publisher_timeout)
        # Now, not after the subscribers' timeout: a publisher that gave up leaves them waiting for the rest.
        assert pub.returncode == 0, f"the publisher ended with exit code {pub.returncode} (its stderr is above)"
        sub_outs = [sub.communicate(timeout=subscriber_timeout)[0] for sub in subs]
    finally:
        for proc in (pub, *subs):
            proc.kill()
    return last_json(pub_out), [last_json(out) for out in sub_outs]


def run_publisher_and_subscriber(script: str, *args: str, publisher_timeout: float = 240.0,
                                 subscriber_timeout: float = 60.0) -> tuple[Any, Any]:
    """Roles ``subscriber`` and ``publisher`` of ``script``, with the same ``args``: their JSON results."""
    published, (seen,) = run_peers(script, ["publisher", *args], [["subscriber", *args]], publisher_timeout,
                                   subscriber_timeout)
    return published, seen


def play(roles: Mapping[str, Callable[..., Any]]) -> None:
    """A peer script's entry: run ``roles[argv[1]]`` with the arguments after it (strings) and print what it
    returns, unless None, as the last line, in JSON."""
    role, *args = sys.argv[1:] or [""]
    if role not in roles:
        raise SystemExit(f"unknown role {role!r}: one of {', '.join(roles)}")
    result = roles[role](*args)
    if result is not None:
        print(json.dumps(result), flush=True)


@contextmanager
def peer_node(name: str) -> Iterator[Any]:
    """A peer process's one rclpy node, rclpy initialised around it."""
    import rclpy

    rclpy.init()
    node = rclpy.create_node(name)
    try:
        yield node
    finally:
        node.destroy_node()
        rclpy.shutdown()


def line_with(stream, text: str, limit: int = 20) -> str:
    """The first of a process's next ``limit`` output lines that holds ``text`` (rcl may log before the process's
    own first line: Jazzy warns that ROS_LOCALHOST_ONLY is deprecated); AssertionError with the lines read if none."""
    lines = []
    while len(lines) < limit:
        lines.append(stream.readline())
        if text in lines[-1]:
            return lines[-1]
        if not lines[-1]:
            break
    raise AssertionError(f"no line with {text!r} in {lines}")


def own_lines(stderr: str) -> list[str]:
    """A process's stderr lines less rcl's own log lines (Jazzy warns about the tests' ROS_LOCALHOST_ONLY)."""
    return [line for line in stderr.strip().splitlines() if "] [rcl]: " not in line]

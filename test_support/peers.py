"""Test support (not shipped): peer scripts, the real processes of multi-process tests, from both ends.

A peer script is ``script ROLE ARGS...``: :func:`play` runs the named role, which may print lines of its
own and returns what it prints last, as one JSON line. The test starts peers with :func:`spawn_peer` (and
talks to one line by line with :func:`ask`), or runs subscribers and a publisher to the end with
:func:`run_peers` and reads their last lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any


def last_json(text: str) -> Any:
    """The last line a peer printed, parsed."""
    return json.loads(text.strip().splitlines()[-1])


#: Set in a peer's environment, its :func:`peer_node` is torn down only once its stdin is closed (see run_peers).
TEARDOWN_ON_STDIN = "R2CI_TEARDOWN_ON_STDIN"


def spawn_peer(script: str, *args: str, stdin: bool = False, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """``script`` started with ``args``, its stdout (and, with ``stdin``, its stdin) a text pipe."""
    return subprocess.Popen([sys.executable, script, *args], stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.PIPE if stdin else None, env=env)


def ask(peer: subprocess.Popen, line: str) -> Any:
    """Send a peer started with ``stdin=True`` one line; its one-line JSON answer."""
    peer.stdin.write(line + "\n")
    peer.stdin.flush()
    return json.loads(peer.stdout.readline())


def run_peers(script: str, publisher: Sequence[str], subscribers: Sequence[Sequence[str]],
              publisher_timeout: float = 240.0, subscriber_timeout: float = 60.0) -> tuple[Any, list[Any]]:
    """Start every subscriber, then the publisher (each its command-line arguments); once the publisher is done
    and has exited 0, the JSON results: the publisher's, and the subscribers' in order.

    The peers end one at a time, the publisher first, then each subscriber once the one before has exited:
    Fast DDS 3.2 can deadlock deleting a participant while another participant's removal reaches it (see
    docs/decisions.md), and a run whose peers all finish in the same instant (the last acknowledgement ends
    them all) is exactly that.  A subscriber finishes its work, then waits for its stdin to close to tear down.
    """
    teardown_on_stdin = {**os.environ, TEARDOWN_ON_STDIN: "1"}
    subs = [spawn_peer(script, *args, stdin=True, env=teardown_on_stdin) for args in subscribers]
    pub = spawn_peer(script, *publisher)
    try:
        pub_out, _ = pub.communicate(timeout=publisher_timeout)
        # Now, not after the subscribers' timeout: a publisher that gave up leaves them waiting for the rest.
        assert pub.returncode == 0, f"the publisher ended with exit code {pub.returncode} (its stderr is above)"
        sub_outs = [sub.communicate(timeout=subscriber_timeout)[0] for sub in subs]  # closes its stdin: its turn
    finally:
        for proc in (pub, *subs):
            proc.kill()
    return last_json(pub_out), [last_json(out) for out in sub_outs]


def stop_in_turn(processes: Mapping[str, subprocess.Popen], timeout: float = 30.0) -> dict[str, str]:
    """SIGINT each process still running, in order, each once the one before has ended (see :func:`run_peers`
    for why not all at once); their stderr (a pipe), by name.  One still running ``timeout`` s after its SIGINT
    fails the test with its threads' C stacks, then is killed, as are the rest."""
    import signal

    from ros2_cuda_ipc_examples.pipelines.stacks import native_stacks

    errors: dict[str, str] = {}
    try:
        for name, process in processes.items():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
            try:
                errors[name] = process.communicate(timeout=timeout)[1] or ""
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name} still ran {timeout:.0f} s after its SIGINT\n"
                                     f"{native_stacks(process.pid)}") from None
    finally:
        for process in processes.values():
            process.kill()
    return errors


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
    profile = os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE")
    if profile and not os.path.isfile(profile):  # Fast DDS would log it and go on with its default transports
        raise SystemExit(f"the DDS profile {profile} is not there for this peer (a private /tmp hides it?)")
    result = roles[role](*args)
    if result is not None:
        print(json.dumps(result), flush=True)


@contextmanager
def peer_node(name: str) -> Iterator[Any]:
    """A peer process's one rclpy node, rclpy initialised around it; with ``TEARDOWN_ON_STDIN`` set, torn down only
    once stdin is closed (the harness's turn for it)."""
    import rclpy

    rclpy.init()
    node = rclpy.create_node(name)
    try:
        yield node
    finally:
        if os.environ.get(TEARDOWN_ON_STDIN):
            sys.stdin.read()
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

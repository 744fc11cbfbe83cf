"""Test support (not shipped): the runs of the fallback tests, the same for images and point clouds.

A publisher here, a zero-copy subscriber here, and a subscriber somewhere it cannot map the pool
(:mod:`isolation`): every frame of a burst reaches both, checked byte for byte, and the publisher's
twin is fed only while the far subscriber exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from isolation import Place

PEER = str(Path(__file__).with_name("fallback_peer.py"))


class Peer:
    """One peer process of ``fallback_peer.py`` at ``place``; stderr kept for the test to read."""

    def __init__(self, place: Place, *args: str) -> None:
        self.proc = subprocess.Popen(place.command(sys.executable, PEER, *args), env=place.env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ask(self, line: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise AssertionError(f"the peer ended on {line!r}: {self.finish(5)[1]}")
        try:
            return json.loads(answer)
        except json.JSONDecodeError:
            raise AssertionError(f"the peer answered {line!r} with {answer!r}, not JSON") from None

    def finish(self, timeout: float = 120) -> tuple[Any, str]:
        """Its last JSON line (None if it printed none) and its stderr, once it has ended."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        finally:
            self.proc.kill()
        lines = out.strip().splitlines()
        return (json.loads(lines[-1]) if lines else None), err

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def far_and_near(kind: str, topic: str, here: Place, there: Place, frames: int = 100) -> dict[str, Any]:
    """The whole run: what the publisher's counters said at each step and what each subscriber saw."""
    peers: list[Peer] = []
    try:
        publisher = Peer(here, "publisher", kind, topic)
        near = Peer(here, "subscriber", kind, topic, "near", "auto", str(frames))
        peers += [publisher, near]
        run: dict[str, Any] = {"matched": publisher.ask("match 1")}
        run["before"] = publisher.ask("burst 5 before near")
        far = Peer(there, "subscriber", kind, topic, "far", "auto", str(frames))
        peers.append(far)
        run["warm"] = publisher.ask("await_twin near,far")
        run["main"] = publisher.ask(f"burst {frames} main near,far")
        run["far"], run["far_log"] = far.finish()
        run["gone"] = publisher.ask("await_no_twin")
        run["after"] = publisher.ask("burst 5 after -")
        run["end"] = publisher.ask("quit")
        run["near"], _ = near.finish(30)  # it saw only frames before, warm-up and main ones as main: see its count
        return run
    finally:
        for peer in peers:
            peer.kill()


def refused(kind: str, topic: str, here: Place, there: Place, fallback: str, frames: int = 20) -> dict[str, Any]:
    """A publisher here and one subscriber ``there`` with ``fallback``: what the subscriber saw and said."""
    peers: list[Peer] = []
    try:
        publisher = Peer(here, "publisher", kind, topic)
        sub = Peer(there, "subscriber", kind, topic, "far", fallback, str(frames))
        peers += [publisher, sub]
        publisher.ask("match 1")
        if fallback == "auto":
            publisher.ask("await_twin far")
            publisher.ask(f"burst {frames} main far")
        else:
            publisher.ask(f"burst {frames + 5} main -")
        result, log = sub.finish()
        return {"sub": result, "log": log, "publisher": publisher.ask("quit")}
    finally:
        for peer in peers:
            peer.kill()


@contextmanager
def peer_group() -> Iterator[Callable[..., Peer]]:
    """``start(place, *args)`` starts a :class:`Peer`; every peer started is killed when the block ends."""
    peers: list[Peer] = []

    def start(place: Place, *args: str) -> Peer:
        peers.append(Peer(place, *args))
        return peers[-1]

    try:
        yield start
    finally:
        for peer in peers:
            peer.kill()


def published_there(kind: str, topic: str, there: Place, here: Place, frames: int = 60,
                    through_twin: bool = False) -> dict[str, Any]:
    """A publisher ``there`` and one subscriber ``here`` (reading the CPU twin, ``through_twin``): every frame of a
    burst, what the subscriber saw and said."""
    peers: list[Peer] = []
    try:
        publisher = Peer(there, "publisher", kind, topic)
        sub = Peer(here, "subscriber", kind, topic, "sub", "auto", str(frames))
        peers += [publisher, sub]
        publisher.ask("match 1")
        publisher.ask("await_twin sub" if through_twin else "await_ack sub")
        publisher.ask(f"burst {frames} main sub")
        result, log = sub.finish()
        return {"sub": result, "log": log, "publisher": publisher.ask("quit")}
    finally:
        for peer in peers:
            peer.kill()

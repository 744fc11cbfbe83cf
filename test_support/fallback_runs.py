"""Test support (not shipped): the runs of the fallback tests, the same for images and point clouds.

A publisher here, a zero-copy subscriber here, and a subscriber somewhere it cannot map the pool
(:mod:`isolation`): every frame of a burst reaches both, checked byte for byte, and the publisher's
twin is fed only while the far subscriber exists.

Every peer deletes its DDS participant only on its turn, once its stdin is closed (``TEARDOWN_ON_STDIN``), and
the peers of a run end one at a time: peers that all finish on the same last frame would otherwise delete their
participants in the same instant, the trigger of Fast DDS 3.2's deadlock in ``destroy_node`` (docs/decisions.md).
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
from peers import TEARDOWN_ON_STDIN

from ros2_cuda_ipc_examples.pipelines.stacks import native_stacks

PEER = str(Path(__file__).with_name("fallback_peer.py"))


class Peer:
    """One peer process of ``fallback_peer.py`` at ``place``; stderr kept for the test to read."""

    def __init__(self, place: Place, *args: str) -> None:
        self.name = " ".join(args)
        env = {**place.env, TEARDOWN_ON_STDIN: "1"}
        self.proc = subprocess.Popen(place.command(sys.executable, PEER, *args), env=env, text=True,
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
        """Close its stdin (its turn to tear down); its last JSON line (None if it printed none) and its stderr, once
        it has ended.  Still running ``timeout`` s later, it fails the test with its threads' stacks."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"peer {self.name!r} still ran {timeout:.0f} s after its stdin closed\n"
                                 f"{native_stacks(self.proc.pid)}") from None
        finally:
            self.proc.kill()
        lines = out.strip().splitlines()
        return (json.loads(lines[-1]) if lines else None), err

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@contextmanager
def peer_group() -> Iterator[Callable[..., Peer]]:
    """``start(place, *args)`` starts a :class:`Peer`.  When the block ends, every peer still running ends in the
    order it was started, each once the one before has ended; when the block failed, all are killed at once."""
    peers: list[Peer] = []

    def start(place: Place, *args: str) -> Peer:
        peers.append(Peer(place, *args))
        return peers[-1]

    try:
        yield start
        for peer in peers:
            if peer.proc.poll() is None:
                peer.finish(30)
    finally:
        for peer in peers:
            peer.kill()


def far_and_near(kind: str, topic: str, here: Place, there: Place, frames: int = 100) -> dict[str, Any]:
    """The whole run: what the publisher's counters said at each step and what each subscriber saw."""
    with peer_group() as start:
        publisher = start(here, "publisher", kind, topic)
        near = start(here, "subscriber", kind, topic, "near", "auto", str(frames))
        run: dict[str, Any] = {"matched": publisher.ask("match 1")}
        run["before"] = publisher.ask("burst 5 before near")
        far = start(there, "subscriber", kind, topic, "far", "auto", str(frames))
        run["warm"] = publisher.ask("await_twin near,far")
        run["main"] = publisher.ask(f"burst {frames} main near,far")
        run["far"], run["far_log"] = far.finish()
        run["gone"] = publisher.ask("await_no_twin")
        run["after"] = publisher.ask("burst 5 after -")
        run["end"] = publisher.ask("quit")
        run["near"], _ = near.finish(30)  # it saw only frames before, warm-up and main ones as main: see its count
        return run


def refused(kind: str, topic: str, here: Place, there: Place, fallback: str, frames: int = 20) -> dict[str, Any]:
    """A publisher here and one subscriber ``there`` with ``fallback``: what the subscriber saw and said."""
    with peer_group() as start:
        publisher = start(here, "publisher", kind, topic)
        sub = start(there, "subscriber", kind, topic, "far", fallback, str(frames))
        publisher.ask("match 1")
        if fallback == "auto":
            publisher.ask("await_twin far")
            publisher.ask(f"burst {frames} main far")
        else:
            publisher.ask(f"burst {frames + 5} main -")
        result, log = sub.finish()
        return {"sub": result, "log": log, "publisher": publisher.ask("quit")}


def published_there(kind: str, topic: str, there: Place, here: Place, frames: int = 60,
                    through_twin: bool = False) -> dict[str, Any]:
    """A publisher ``there`` and one subscriber ``here`` (reading the CPU twin, ``through_twin``): every frame of a
    burst, what the subscriber saw and said."""
    with peer_group() as start:
        publisher = start(there, "publisher", kind, topic)
        sub = start(here, "subscriber", kind, topic, "sub", "auto", str(frames))
        publisher.ask("match 1")
        publisher.ask("await_twin sub" if through_twin else "await_ack sub")
        publisher.ask(f"burst {frames} main sub")
        result, log = sub.finish()
        return {"sub": result, "log": log, "publisher": publisher.ask("quit")}

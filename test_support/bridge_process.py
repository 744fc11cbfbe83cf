"""Test support (not shipped): a package's node executable as its own process, as ``ros2 run`` starts it.

The forged-message tests send their messages over DDS to such a process and then ask whether it is still
alive and still converting; its stderr (the node's log) is what the test reads after stopping it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def executable(package: str, name: str) -> str:
    from ament_index_python.packages import get_package_prefix

    return str(Path(get_package_prefix(package)) / "lib" / package / name)


def spin_until(node: Any, done: Callable[[], Any], timeout: float) -> bool:
    """Spin the test's ``node`` until ``done()`` or ``timeout`` seconds; ``done()``."""
    import rclpy

    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    return bool(done())


def spin_for(node: Any, seconds: float) -> None:
    spin_until(node, lambda: False, seconds)


def last_count(log: str, name: str) -> int:
    """The last ``<name> N`` a bridge's periodic stats line logged."""
    counts = re.findall(rf"\b{name} (\d+)", log)
    assert counts, log
    return int(counts[-1])


def fill(array_like: Any, value: float) -> None:
    """Set every element of a frame's array (numpy on host; through torch and DLPack on CUDA) to ``value``."""
    import numpy as np

    if isinstance(array_like.array, np.ndarray):
        array_like.array[...] = value
        return
    import torch

    torch.from_dlpack(array_like).fill_(value)
    torch.cuda.synchronize()


def publish_filled(publisher: Any, value: float, field: str | None = None) -> bool:
    """Borrow a frame of a typed ``publisher`` (if one is free), fill it (its ``field`` view, say ``xyz``) with
    ``value`` and publish it; False, so that it can sit in a ``spin_until`` condition."""
    frame = publisher.borrow(timeout=0.1)
    if frame is not None:
        fill(frame if field is None else getattr(frame, field), value)
        frame.publish()
    return False


class NodeProcess:
    """A running node executable; :attr:`log` is its stderr once :meth:`stop` has run."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.log = ""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        """SIGINT, then its exit code (it is killed if it does not end within 30 s)."""
        if self.alive:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.log = self.proc.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.log = self.proc.communicate()[1]
        return self.proc.returncode


@contextmanager
def node_process(package: str, name: str, node: Any, subscribes_to: str,
                 parameters: Sequence[str] = ()) -> Iterator[NodeProcess]:
    """``package``'s executable ``name`` running, its subscription to ``subscribes_to`` seen by the test's ``node``."""
    args = [executable(package, name), "--ros-args", *(x for p in parameters for x in ("-p", p))]
    running = NodeProcess(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    try:
        up = spin_until(node, lambda: not running.alive or node.count_subscribers(subscribes_to) > 0, 60)
        if not (up and running.alive):
            code = running.stop()
            raise AssertionError(f"{name} did not come up (exit {code}); LD_LIBRARY_PATH="
                                 f"{os.environ.get('LD_LIBRARY_PATH')!r}; its stderr:\n{running.log}")
        yield running
    finally:
        if running.alive:
            running.stop()

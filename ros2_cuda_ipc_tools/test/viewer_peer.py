"""Real publishers for the viewer's tests, from both ends: one known image or point cloud, published again and again
until stopped, and :class:`ViewerPeer`, the test's handle on such a process, whose stop is bounded and explained.

    viewer_peer.py image ENCODING WIDTH HEIGHT MEMORY TOPIC [FPS]
    viewer_peer.py cloud LAYOUT MEMORY TOPIC

(20 frames a second unless FPS says otherwise), each stamped when it is published.

The test compares what the viewer drew with :func:`image_pattern` / :data:`CLOUD_POINTS`.

Why the stop is instrumented: after other GPU work a CUDA publisher of this script did not end within 30 s of its
SIGTERM, three rounds running, and nothing showed where it was.  So the script notes SIGTERM from its first line
on, writes each step of its way out on stderr (``viewer_peer <pid> +<s>: <step>``), dumps every thread's Python
stack on SIGUSR1, and, once stopped, ends itself with its stacks and exit code 1 if the teardown takes longer than
``TEARDOWN_BOUND`` (core's ``teardown_bounded``).  :meth:`ViewerPeer.stop` waits ``STOP_WAIT`` s for it, then
takes its Python stacks, its C stacks (gdb) and its threads' kernel stacks before it kills it, and fails with all
of it: a hang on the GPU machine is then a finding with a place.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from peers import peer_node, play
from std_msgs.msg import Header

from ros2_cuda_ipc_core import TEARDOWN_BOUND, teardown_bounded
from ros2_cuda_ipc_image import ImagePublisher, encoding_layout

#: Points a cloud test draws: the camera's target (the origin) and three around it, 2 m away.
CLOUD_POINTS = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]], dtype=np.float32)

#: Seconds the test waits for a stopped peer before it takes its stacks and kills it: a clean stop takes well under
#: one; less than the peer's own bound (TEARDOWN_BOUND), so that the peer is still there to be asked.
STOP_WAIT = 10.0
assert STOP_WAIT < TEARDOWN_BOUND
#: Seconds a stopped peer waits for the viewer's subscription to leave its matches before it deletes its own DDS
#: participant: deleting one while a peer's removal is in flight is Fast DDS 3.2's deadlock (docs/decisions.md).
UNMATCH_WAIT = 2.0

_SCRIPT = str(Path(__file__).resolve())
_STARTED = time.monotonic()


def image_pattern(encoding: str, width: int, height: int) -> np.ndarray:
    """A frame whose every pixel differs from its neighbours, (height, width, channels) of the encoding's type."""
    dtype, channels = encoding_layout(encoding)
    rows, cols, chans = np.ogrid[:height, :width, :channels]
    if dtype == np.uint8:
        return ((rows * 7 + cols * 3 + chans * 50) % 256).astype(np.uint8)
    if dtype == np.uint16:
        return ((rows * 911 + cols * 257) % 65536).astype(np.uint16) + np.zeros(chans.shape, np.uint16)
    return ((rows * width + cols) / (width * height) + np.zeros(chans.shape)).astype(dtype)


# --- the peer process ---------------------------------------------------------------------------------------------

_stops: list[int] = []
#: Armed once the stop is noted (teardown_bounded), disarmed when the process is about to exit.
_teardown = contextlib.ExitStack()


def _step(what: str) -> None:
    """One step of the peer's life on stderr, so a stop that hangs shows the last one reached."""
    print(f"viewer_peer {os.getpid()} +{time.monotonic() - _STARTED:.3f}s: {what}", file=sys.stderr, flush=True)


def _note_stop(signum: int, _frame: object) -> None:
    _stops.append(signum)


def _run_until_stopped(publisher: Any, publish: Callable[[], int], fps: float = 20.0) -> dict:
    """Publish at ``fps`` until SIGTERM (or 120 s); then bound the teardown and wait, at most ``UNMATCH_WAIT`` s, until
    no subscription is matched any more, so the viewer's removal is not in flight while this process deletes its
    participant."""
    signal.signal(signal.SIGTERM, _note_stop)  # again: rclpy.init put its own handler over the one set at start
    _step(f"publishing from {publisher.pool.memory} memory")
    sent, deadline, period = 0, time.monotonic() + 120, 1.0 / fps
    next_frame = time.monotonic()
    matched = 0
    try:
        while not _stops and time.monotonic() < deadline:
            sent += publish()
            if sent == 1:
                _step("first frame sent")
            count = publisher.subscription_count  # when the viewer was discovered: late frames or late DDS
            if count != matched:
                matched = count
                _step(f"{matched} subscription(s) matched after {sent} frames")
            next_frame += period
            time.sleep(max(0.0, next_frame - time.monotonic()))
    except KeyboardInterrupt:
        pass
    _teardown.enter_context(teardown_bounded())
    _step(f"stop noted ({'SIGTERM' if _stops else 'deadline or Ctrl-C'}) after {sent} frames; "
          f"{publisher.subscription_count} subscription(s) matched; the pool's counters: "
          f"{ {k: v for k, v in publisher.pool.stats().items() if v} }")
    unmatched_by = time.monotonic() + UNMATCH_WAIT
    while publisher.subscription_count and time.monotonic() < unmatched_by:
        time.sleep(0.05)
    _step(f"{publisher.subscription_count} subscription(s) matched now; closing the publisher")
    return {"sent": sent}


def image(encoding: str, width: str, height: str, memory: str, topic: str, fps: str = "20") -> dict:
    frame_data = image_pattern(encoding, int(width), int(height))
    with peer_node("viewer_test_camera") as node:
        _step("node made")
        pub = ImagePublisher(node, topic, width=int(width), height=int(height), encoding=encoding, memory=memory,
                             row_alignment=256, reuse_delay=0)
        try:
            def publish() -> int:
                return int(pub.publish_array(frame_data, header=Header(stamp=node.get_clock().now().to_msg())) is not None)

            return _run_until_stopped(pub, publish, float(fps))
        finally:
            pub.close()
            _step("publisher closed (its pool's memory given back); destroying the node")


def cloud(layout: str, memory: str, topic: str) -> dict:
    from ros2_cuda_ipc_pointcloud import NAMED_LAYOUTS, PointCloudPublisher

    fields, point_step = NAMED_LAYOUTS[layout]
    with peer_node("viewer_test_lidar") as node:
        _step("node made")
        pub = PointCloudPublisher(node, topic, fields=fields, width=len(CLOUD_POINTS), point_step=point_step,
                                  memory=memory, reuse_delay=0)
        try:
            points = np.zeros(len(CLOUD_POINTS), dtype=pub.layout.dtype)
            for axis, name in enumerate("xyz"):
                points[name] = CLOUD_POINTS[:, axis]
            if "intensity" in points.dtype.names:
                points["intensity"] = np.arange(len(CLOUD_POINTS), dtype=np.float32)

            def publish() -> int:
                return int(pub.publish_array(points, header=Header(stamp=node.get_clock().now().to_msg())) is not None)

            return _run_until_stopped(pub, publish)
        finally:
            pub.close()
            _step("publisher closed (its pool's memory given back); destroying the node")


def _main() -> None:
    """The peer's life: a stop noted from here on, every thread's Python stack on SIGUSR1."""
    signal.signal(signal.SIGTERM, _note_stop)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    _step("started")
    with _teardown:
        play({"image": image, "cloud": cloud})
        _step("node destroyed, rclpy shut down; exiting")


# --- the test's end ---------------------------------------------------------------------------------------------

def kernel_stacks(pid: int) -> str:
    """Each thread's kernel stack (/proc/PID/task/TID/stack; root only): where a thread in state D waits in a driver."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*"), key=lambda p: int(p.name)):
        try:
            stack = (task / "stack").read_text().strip()
        except OSError as exc:
            stack = f"(unreadable: {exc.strerror})"
        lines.append(f"  tid {task.name}:\n" + "\n".join(f"    {line}" for line in stack.splitlines()))
    return "\n".join(lines) or "  (no threads left)"


class ViewerPeer:
    """A running ``viewer_peer.py`` (``args`` as on its command line), its stderr in ``log_dir``; :meth:`stop` ends it."""

    def __init__(self, log_dir: Path, *args: str) -> None:
        self.args = args
        self.log = Path(log_dir) / f"viewer_peer-{'-'.join(args[:2])}-{args[-1] if len(args) > 2 else ''}.log"
        with open(self.log, "w") as stderr:
            self.process = subprocess.Popen([sys.executable, _SCRIPT, *args], stdout=subprocess.DEVNULL, stderr=stderr)

    def stop(self) -> None:
        """SIGTERM, then at most ``STOP_WAIT`` s for exit code 0; else AssertionError with the peer's steps, its Python
        stacks, its C stacks and its kernel stacks (the peer is killed)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            raise AssertionError(self._hung()) from None
        assert code == 0, f"viewer_peer {' '.join(self.args)} ended with exit code {code}; its stderr:\n{self._log()}"

    def _hung(self) -> str:
        from ros2_cuda_ipc_examples.pipelines.stacks import native_stacks

        pid = self.process.pid
        self.process.send_signal(signal.SIGUSR1)  # faulthandler writes every thread's Python stack to its log
        kernel = kernel_stacks(pid)
        native = native_stacks(pid)
        self.process.kill()
        try:
            self.process.wait(timeout=10)
            after = f"killed (exit code {self.process.returncode})"
        except subprocess.TimeoutExpired:
            after = "still there 10 s after SIGKILL (stuck in the kernel: see its kernel stacks)"
        return (f"viewer_peer {' '.join(self.args)} (pid {pid}) still ran {STOP_WAIT:.0f} s after its SIGTERM; {after}.\n"
                f"-- its stderr (its steps, then its Python stacks):\n{self._log()}\n"
                f"-- its threads and C stacks:\n{native}\n-- its kernel stacks:\n{kernel}")

    def _log(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"

    def __enter__(self) -> ViewerPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    _main()

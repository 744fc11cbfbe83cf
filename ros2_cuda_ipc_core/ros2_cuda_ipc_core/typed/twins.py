"""The CPU twins of a typed publisher (DESIGN §11): ``sensor_msgs`` topics fed only while someone subscribes.

Every frame published on the descriptor topic is offered to the twins.  With no twin subscribed the
offer costs one ``get_subscription_count`` per twin and nothing is leased, downloaded or encoded.  With
one, the publisher's own block is leased (same-process path, ordered on a side stream after the frame's
ready event) and handed to a :class:`BackgroundDownload` worker that converts and publishes, so the
zero-copy readers never wait for it; a frame offered while the worker is busy is dropped and counted.
A twin whose conversion needs a library's warm-up (the JPEG encoder: seconds on the GPU) gets it on the
worker before its first frame; frames offered meanwhile are counted as ``warmup_drops``, apart from the
steady state's ``busy_drops``.

Topic names follow one rule, :func:`twin_topic`: the descriptor topic's resolved name plus ``/cpu``
(images add the ``/compressed`` sibling, as image_transport pairs them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Ros2CudaIpcError
from ..stats import Counters
from .download import BackgroundDownload

__all__ = ["CpuTwins", "TwinSpec", "twin_topic"]

#: What :func:`twin_topic` appends to the descriptor topic.
TWIN_SUFFIX = "/cpu"


def twin_topic(topic: str) -> str:
    """The base CPU twin topic of descriptor topic ``topic`` (its resolved name): ``/camera/gpu`` -> ``/camera/gpu/cpu``."""
    return topic.rstrip("/") + TWIN_SUFFIX


@dataclass(frozen=True)
class TwinSpec:
    """One CPU twin: its message type, topic, how a leased view becomes its message, and the work it counts.

    ``work`` names the counter one conversion bumps (``"downloads"`` or ``"encodes"``); ``warm_up``, if
    any, runs on the worker before the first conversion (that frame stays leased meanwhile, so it is not
    lost), and again before the next if it raised.
    """

    message_type: type
    topic: str
    convert: Callable[[Any], Any]
    work: str = "downloads"
    warm_up: Callable[[], object] | None = None


class CpuTwins:
    """The twins of one typed publisher: advertised at once, fed lazily, at most ``rate`` Hz (0: every frame).

    ``read(msg, stream)`` leases the publisher's own block of a just-published message as a typed view.
    ``cuda_device`` is the pool's device for CUDA pools (the side stream lives there), None for host pools.
    """

    def __init__(self, node: Any, specs: Sequence[TwinSpec], read: Callable[[Any, int], Any], *, qos: Any = 10,
                 rate: float = 0.0, cuda_device: int | None = None, name: str = "twins") -> None:
        if not rate >= 0.0:
            raise ValueError(f"fallback_rate {rate} must be 0 (every frame) or a positive rate in Hz")
        self.specs = tuple(specs)
        self.rate = float(rate)
        self._node = node
        self._read = read
        self._pairs = [(spec, node.create_publisher(spec.message_type, spec.topic, qos)) for spec in self.specs]
        self._worker = BackgroundDownload(name, cuda_device)
        self._last = float("-inf")
        self._warm: set[str] = set()
        self.counters = Counters("offered", "idle", "rate_skips", "warm_ups", "leased", "lease_failures", "downloads",
                                 "encodes",
                                 *(f"published {spec.topic}" for spec in self.specs))

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(spec.topic for spec in self.specs)

    def subscription_counts(self) -> dict[str, int]:
        """Subscriptions matched with each twin now, by topic."""
        return {spec.topic: int(pub.get_subscription_count()) for spec, pub in self._pairs}

    def offer(self, msg: Any) -> None:
        """Called after ``msg`` went out on the descriptor topic: feed the twins that have subscribers, if any."""
        self.counters.add("offered")
        wanted = [(spec, pub) for spec, pub in self._pairs if pub.get_subscription_count()]
        if not wanted:
            self.counters.add("idle")
            return
        now = time.monotonic()
        if self.rate and now - self._last < 1.0 / self.rate:
            self.counters.add("rate_skips")
            return
        cold = [spec for spec, _pub in wanted if spec.warm_up is not None and spec.topic not in self._warm]
        try:
            leased = self._worker.submit(lambda stream: self._read(msg, stream), lambda view: self._convert(view, wanted),
                                         warm_up=(lambda: self._warm_up(cold)) if cold else None)
        except Ros2CudaIpcError:  # the block moved on already (reuse_delay 0): this frame's twins are lost
            self.counters.add("lease_failures")
            return
        if leased:
            self._last = now
            self.counters.add("leased")

    def _warm_up(self, specs: Sequence[TwinSpec]) -> None:
        """On the worker: each spec's warm-up; one that succeeded is not run again (one that raised is retried)."""
        for spec in specs:
            if spec.warm_up is not None:
                spec.warm_up()
                self._warm.add(spec.topic)
                self.counters.add("warm_ups")

    def _convert(self, view: Any, wanted: list[tuple[TwinSpec, Any]]) -> Callable[[], None]:
        """Make every wanted twin message from the leased ``view``; what it returns publishes them, lease given back."""
        made = []
        for spec, pub in wanted:
            made.append((spec, pub, spec.convert(view)))
            self.counters.add(spec.work)

        def publish() -> None:
            for spec, pub, out in made:
                pub.publish(out)
                self.counters.add(f"published {spec.topic}")

        return publish

    def stats(self) -> dict[str, int]:
        """Offers, frames leased for the twins, downloads, encodes, messages published per twin, warm-ups and
        the frames dropped during them (``warmup_drops``), and the worker's ``busy_drops`` (frames dropped
        because the previous one was still in work) and ``failed``."""
        worker = self._worker.stats()
        return {**self.counters.snapshot(), "busy_drops": worker["busy_drops"], "warmup_drops": worker["warmup_drops"],
                "failed": worker["failed"]}

    def close(self) -> None:
        """Finish the frame in work, then withdraw the twin topics."""
        self._worker.close()
        pairs, self._pairs = self._pairs, []
        for _spec, pub in pairs:
            self._node.destroy_publisher(pub)

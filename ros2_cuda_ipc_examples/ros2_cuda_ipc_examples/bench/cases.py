"""The run's plan: every (mode, rate, payload, transport) case, in the order both processes run them."""

from __future__ import annotations

import collections
from dataclasses import asdict, dataclass
from typing import Any

from .payloads import Payload

TRANSPORTS = ("cuda", "host", "cuda-direct", "host-direct", "cuda-subscription", "host-subscription", "sensor_msgs",
              "fallback", "floor")
TRANSPORT_LABELS = {
    "cuda": "ros2_cuda_ipc cuda",
    "host": "ros2_cuda_ipc host",
    "cuda-direct": "ros2_cuda_ipc cuda, delivery=direct",
    "host-direct": "ros2_cuda_ipc host, delivery=direct",
    "cuda-subscription": "ros2_cuda_ipc cuda, typed subscription",
    "host-subscription": "ros2_cuda_ipc host, typed subscription",
    "sensor_msgs": "sensor_msgs over DDS",
    "fallback": "ros2_cuda_ipc CPU twin (fallback)",
    "floor": "descriptor only (floor)",
}
#: Transports whose frames the producer writes into a pool block: "fallback" does too, in a pool of its own
#: whose CPU twin the consumer reads, as a subscriber that cannot map the pool (or rviz) would.
#: "cuda" and "host" are read by a plain rclpy subscription and a typed reader; the ones below by a typed subscription
#: (``ImageSubscription``, ...) on a topic of their own: "-direct" with ``delivery="direct"``, "-subscription" in the
#: executor.
POOL_TRANSPORTS = ("cuda", "host", "cuda-direct", "host-direct", "cuda-subscription", "host-subscription", "fallback")
SUBSCRIPTION_TRANSPORTS = {"cuda-direct": "direct", "host-direct": "direct", "cuda-subscription": "executor",
                           "host-subscription": "executor"}
#: What a run measures unless told: the typed subscriptions' rows are asked for by name.
DEFAULT_TRANSPORTS = tuple(name for name in TRANSPORTS if name not in SUBSCRIPTION_TRANSPORTS)
MODES = ("latency", "throughput")


@dataclass(frozen=True)
class Case:
    """``frames`` measured frames (after ``warmup`` unmeasured ones) of one payload through one transport."""

    index: int
    mode: str
    transport: str
    payload: Payload
    rate: float | None  # frames per second in latency mode; None: as fast as the pipeline goes
    frames: int
    warmup: int

    @property
    def total_frames(self) -> int:
        return self.warmup + self.frames

    @property
    def title(self) -> str:
        pace = f"{self.rate:g} Hz" if self.rate else "max rate"
        return f"{self.mode} {pace} {self.payload.name} {TRANSPORT_LABELS[self.transport]}"


@dataclass(frozen=True)
class Plan:
    """What both processes need to know: the cases, where frames live, and who touches the bytes on a GPU."""

    cases: tuple[Case, ...]
    memory: str  # "cuda" or "host": where sensor_msgs frames start and end
    gpu_library: str | None
    blocks: int
    reuse_delay: float  # seconds before a published block is reused
    in_flight: int
    case_seconds: float  # throughput mode: a case stops sending after this long
    consumer_device: int = 0  # the GPU the consumer's streams run on (another than the pool's: a cross-device read)
    executor: str = "single"  # the consumer's executor: single (rclpy's SingleThreadedExecutor) or events (C++)

    @property
    def payloads(self) -> list[Payload]:
        return list(dict.fromkeys(case.payload for case in self.cases))

    def pools(self) -> list[tuple[str, Payload]]:
        """(transport, payload) of every ros2_cuda_ipc publisher the producer keeps for the whole run."""
        pairs = {(case.transport, case.payload) for case in self.cases if case.transport in POOL_TRANSPORTS}
        return sorted(pairs, key=lambda pair: (pair[0], pair[1].byte_size))

    def pool_memory(self, transport: str) -> str:
        """Where a pool transport's blocks live: its own name (less "-direct" or "-subscription"), or (the fallback)
        where the run's frames do."""
        return self.memory if transport == "fallback" else transport.split("-")[0]

    def publisher_counts(self) -> dict[str, int]:
        """Publishers per data topic that the consumer must discover before the run starts."""
        from .kinds import KINDS

        def kinds(transport: str) -> set[str]:
            return {case.payload.kind for case in self.cases if case.transport == transport}

        topics = [KINDS[payload.kind].gpu_topic for transport, payload in self.pools() if transport in ("cuda", "host")]
        topics += [KINDS[payload.kind].topic_for(SUBSCRIPTION_TRANSPORTS[transport]) for transport, payload in self.pools()
                   if transport in SUBSCRIPTION_TRANSPORTS]
        topics += [KINDS[kind].twin_topic for kind in kinds("fallback")]
        topics += [KINDS[kind].gpu_topic for kind in kinds("floor")]
        topics += [KINDS[kind].sensor_topic for kind in kinds("sensor_msgs")]
        return dict(collections.Counter(topics))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        cases = tuple(Case(**{**case, "payload": Payload(**case["payload"])}) for case in data["cases"])
        return cls(**{**data, "cases": cases})


def make_plan(modes: list[str], transports: list[str], payloads: list[Payload], rates: list[float], frames: int,
              warmup: int, memory: str, gpu_library: str | None, blocks: int, reuse_delay: float, in_flight: int,
              case_seconds: float, consumer_device: int = 0, executor: str = "single") -> Plan:
    """Cases grouped by mode and rate, then payload; a payload's transports run back to back."""
    cases: list[Case] = []
    for mode in modes:
        for rate in rates if mode == "latency" else [None]:
            for payload in payloads:
                for transport in transports:
                    cases.append(Case(len(cases), mode, transport, payload, rate, frames, warmup))
    return Plan(tuple(cases), memory, gpu_library, blocks, reuse_delay, in_flight, case_seconds, consumer_device,
                executor)

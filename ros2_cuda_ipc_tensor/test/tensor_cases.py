"""Test support for the tensor tests: every dtype, the bits each test message carries, and how to check them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from ack_flow import publish_acknowledged

from ros2_cuda_ipc_core import DLPackDType

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
          "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"]
CAPACITY = (4, 3, 5)
DIM_NAMES = ("N", "C", "W")
TRANSPOSED = (15, 1, 3)  # elements: C and W swapped in memory, kept as they are


def bits(name: str, seq: int, batch: int, capacity: tuple[int, ...] = CAPACITY) -> np.ndarray:
    """The raw bits message ``seq`` carries, as the storage dtype (NaNs and all: compared bit for bit)."""
    element = DLPackDType.of(name)
    rng = np.random.default_rng(seq)
    shape = (batch, *capacity[1:])
    if name == "bool":
        return rng.integers(0, 2, shape, dtype=np.uint8).view(np.bool_)
    raw = rng.integers(0, 256, int(np.prod(shape)) * element.itemsize, dtype=np.uint8)
    return raw.view(element.storage).reshape(shape)


def case(seq: int) -> tuple[str, int, bool]:
    """Message ``seq``'s dtype, batch size (varies) and whether its publisher uses transposed strides."""
    name = DTYPES[seq % len(DTYPES)]
    return name, seq % CAPACITY[0] + 1, (seq // len(DTYPES)) % 2 == 1


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                                                  np.ascontiguousarray(b).view(np.uint8))


def publish_through_all(node: Any, topic: str, publishers: list[Any], count: int, publish: Callable[[int], None]) -> int:
    """``publish(seq)`` for ``count`` messages, acknowledged one at a time, once every publisher of ``topic`` has
    matched the subscriber; then close them and return how many they published."""
    publish_acknowledged(node, topic, count, 1, publish, lambda: min(p.subscription_count for p in publishers))
    published = sum(p.pool.stats()["published"] for p in publishers)
    for publisher in publishers:
        publisher.close()
    return published

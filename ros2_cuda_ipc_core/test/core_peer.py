"""Real processes for the core tests (``core_peer.py ROLE ARGS...``).  Each role prints JSON lines on stdout.

  hold            read the descriptor given on stdin, print 'held', keep the lease until killed
  publish-and-wait  make a host pool, publish two blocks with known bytes, print their descriptors, wait
  read-each       for each descriptor on stdin read it once and print its first byte, this process's fd and
                  mapping counts and the reader's stats; an empty line prints the counts and stats alone
  dds-publisher / dds-subscriber   the 1000-message rclpy test (see test_transport_multiprocess.py)
"""

import json
import os
import sys
import time

import numpy as np
from peers import peer_node, play

from ros2_cuda_ipc_core import BlockManager, Reader
from ros2_cuda_ipc_msgs.msg import BufferCore

FIELDS = ("socket_path", "block_id", "uid", "publisher_pid", "memory", "device_id", "byte_size")


def core_to_json(core: BufferCore) -> str:
    data = {name: getattr(core, name) for name in FIELDS}
    data["pool_id"] = bytes(core.pool_id).hex()
    data["event_handle"] = bytes(core.event_handle).hex()
    return json.dumps(data)


def core_from_json(text: str) -> BufferCore:
    data = json.loads(text)
    core = BufferCore()
    for name in FIELDS:
        setattr(core, name, data[name])
    core.pool_id = np.frombuffer(bytes.fromhex(data["pool_id"]), dtype=np.uint8)
    core.event_handle = np.frombuffer(bytes.fromhex(data["event_handle"]), dtype=np.uint8)
    return core


def fill_pattern(words: np.ndarray, seq: int) -> None:
    """Word 0: sequence number; word 1: checksum of words 2..; words 2..: a pattern unique to ``seq``."""
    np.multiply(np.arange(len(words) - 2, dtype=np.uint64), np.uint64(seq * 2 + 1), out=words[2:])
    words[2:] ^= np.uint64(seq)
    words[0] = seq
    words[1] = words[2:].sum(dtype=np.uint64)


def check_pattern(words: np.ndarray, seq: int) -> str | None:
    """None if ``words`` hold exactly what fill_pattern wrote for ``seq``, else what is wrong."""
    if int(words[0]) != seq:
        return f"sequence {int(words[0])} instead of {seq}"
    if int(words[1]) != int(words[2:].sum(dtype=np.uint64)):
        return f"checksum mismatch in message {seq}"
    n = len(words) - 3
    if int(words[2 + n]) != ((n * (seq * 2 + 1)) % 2**64) ^ seq:
        return f"pattern mismatch at the last word of message {seq}"
    return None


def mapping_of(address: int) -> str:
    """The /proc/self/maps line of the mapping that holds ``address``."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            low, high = (int(x, 16) for x in line.split()[0].split("-"))
            if low <= address < high:
                return line.strip()
    return ""


def hold() -> None:
    core = core_from_json(sys.stdin.readline())
    handle = Reader().read(core)
    print(json.dumps({"held": handle.block_id}), flush=True)
    time.sleep(600)


def resource_counts() -> dict:
    """Open fds of this process, and its mappings of pools' memfds: not all its mappings, as the Python heap's
    come and go with load (a 1 MiB arena appeared in a reading process on two loaded cores)."""
    with open("/proc/self/maps") as maps:
        return {"fds": len(os.listdir("/proc/self/fd")),
                "pool_maps": sum("/memfd:ros2_cuda_ipc" in line for line in maps)}


def read_each() -> None:
    reader = Reader(liveness_interval=0)
    for line in sys.stdin:
        first = None
        if line.strip():
            with reader.read(core_from_json(line)) as handle:
                first = int(handle.view((1,), np.uint8)[0])
        print(json.dumps({"first": first, **resource_counts(), **reader.stats()}), flush=True)


def publish_and_wait() -> None:
    pool = BlockManager(1 << 20, block_count=2, memory="host", reuse_delay=0)
    for value in (11, 22):
        block = pool.acquire_for_publish()
        block.view((1 << 20,), np.uint8)[:] = value
        print(core_to_json(block.prepare_publish()), flush=True)
    time.sleep(600)


def flow_controlled_publisher(pool: BlockManager, count: int, subscribers: int, fill, prefix: str) -> dict:
    """Publish ``count`` blocks filled by ``fill(block, seq, extra) -> stream``, never more than a pool
    ahead of the slowest subscriber, so every message must be read; return the run's facts."""
    from ack_flow import ack_qos, publish_acknowledged
    from rclpy.serialization import serialize_message

    facts: dict = {"message_bytes": set(), "extra": {}}
    with peer_node(f"{prefix}_publisher") as node:
        pub = node.create_publisher(BufferCore, f"{prefix}_blocks", ack_qos())

        def publish(seq: int) -> None:
            block = pool.acquire_for_publish(timeout=5.0)
            if block is None:
                raise SystemExit(f"no free block for message {seq}: {pool.stats()}")
            with block:
                stream = fill(block, seq, facts["extra"])
                core = block.prepare_publish(stream)
            facts["message_bytes"].add(len(serialize_message(core)))
            pub.publish(core)

        publish_acknowledged(node, f"{prefix}_blocks", count, pool.block_count, publish, pub.get_subscription_count,
                             subscribers)
    facts["stats"] = pool.stats()
    facts["message_bytes"] = sorted(facts["message_bytes"])
    return facts


def acking_subscriber(name: str, count: int, check, prefix: str, reader: Reader | None = None) -> dict:
    """Read ``count`` descriptors with ``check(reader, core, seq, result) -> problem | None``; ack each one."""
    from ack_flow import receive_acknowledged

    reader = Reader() if reader is None else reader
    found: dict = {}  # what check records besides problems

    def check_core(core: BufferCore, seq: int) -> list[str]:
        problem = check(reader, core, seq, found)
        return [problem] if problem else []

    with peer_node(f"{prefix}_{name}") as node:
        result = receive_acknowledged(node, f"{prefix}_blocks", BufferCore, count, reader, check_core, name)
    return {**found, **result, "stats": reader.stats()}


def dds_publisher(count: str, subscribers: str) -> dict:
    with BlockManager(8 << 20, block_count=4, memory="host", reuse_delay=0) as pool:
        def fill(block, seq, extra):
            fill_pattern(block.view((pool.block_size // 8,), np.uint64), seq)

        return flow_controlled_publisher(pool, int(count), int(subscribers), fill, "core_test")


def dds_subscriber(name: str, count: str) -> dict:
    def check(reader, core, seq, result):
        with reader.read(core) as handle:
            words = handle.view((handle.byte_size // 8,), np.uint64)
            result["readonly"] = result.get("readonly", True) and not words.flags.writeable
            memfd = "/memfd:ros2_cuda_ipc" in mapping_of(words.ctypes.data)
            result["memfd_mapping"] = result.get("memfd_mapping", True) and memfd
            return check_pattern(words, seq)

    return acking_subscriber(name, int(count), check, "core_test")


if __name__ == "__main__":
    play({"hold": hold, "publish-and-wait": publish_and_wait, "read-each": read_each, "dds-publisher": dds_publisher,
          "dds-subscriber": dds_subscriber})

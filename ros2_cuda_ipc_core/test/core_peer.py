"""Real processes for the core tests.  Each role prints JSON lines on stdout.

  hold            read the descriptor given on stdin, print 'held', keep the lease until killed
  publish-and-wait  make a host pool, publish two blocks with known bytes, print their descriptors, wait
  dds-publisher / dds-subscriber   the 1000-message rclpy test (see test_transport_multiprocess.py)
"""

import json
import os
import sys
import time

import numpy as np

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


def publish_and_wait() -> None:
    pool = BlockManager(1 << 20, block_count=2, memory="host", reuse_delay=0)
    for value in (11, 22):
        block = pool.acquire_for_publish()
        block.view((1 << 20,), np.uint8)[:] = value
        print(core_to_json(block.prepare_publish()), flush=True)
    time.sleep(600)


def _ack(text: str) -> tuple[str, int]:
    name, seq = text.split()
    return name, int(seq)


def flow_controlled_publisher(pool: BlockManager, count: int, subscribers: int, fill, prefix: str) -> dict:
    """Publish ``count`` blocks filled by ``fill(block, seq) -> stream``, never more than a pool ahead of
    the slowest subscriber (their acks), so every message must be read; return the run's facts."""
    import rclpy
    from rclpy.qos import QoSProfile, QoSReliabilityPolicy
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node(f"{prefix}_publisher")
    qos = QoSProfile(depth=100, reliability=QoSReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(BufferCore, f"{prefix}_blocks", qos)
    acked: dict[str, int] = {}
    node.create_subscription(String, f"{prefix}_acks", lambda m: acked.__setitem__(*_ack(m.data)), qos)
    deadline = time.monotonic() + 60
    while len(acked) < subscribers and time.monotonic() < deadline:  # each subscriber says -1 when ready
        rclpy.spin_once(node, timeout_sec=0.05)
    facts: dict = {"message_bytes": set(), "extra": {}}
    for seq in range(count):
        while seq - min(acked.values(), default=-1) > pool.block_count and time.monotonic() < deadline + 300:
            rclpy.spin_once(node, timeout_sec=0.01)
        block = pool.acquire_for_publish(timeout=5.0)
        if block is None:
            raise SystemExit(f"no free block for message {seq}: {pool.stats()}")
        with block:
            stream = fill(block, seq, facts["extra"])
            core = block.prepare_publish(stream)
        facts["message_bytes"].add(len(serialize_message(core)))
        pub.publish(core)
        rclpy.spin_once(node, timeout_sec=0)
    while min(acked.values()) < count - 1 and time.monotonic() < deadline + 400:
        rclpy.spin_once(node, timeout_sec=0.05)
    facts["stats"] = pool.stats()
    facts["message_bytes"] = sorted(facts["message_bytes"])
    node.destroy_node()
    rclpy.shutdown()
    return facts


def acking_subscriber(name: str, count: int, check, prefix: str) -> dict:
    """Read ``count`` descriptors with ``check(reader, core, seq, result) -> problem | None``; ack each one."""
    import rclpy
    from rclpy.qos import QoSProfile, QoSReliabilityPolicy
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node(f"{prefix}_{name}")
    qos = QoSProfile(depth=100, reliability=QoSReliabilityPolicy.RELIABLE)
    acks = node.create_publisher(String, f"{prefix}_acks", qos)
    reader = Reader()
    result: dict = {"verified": 0, "errors": []}
    expected = [0]

    def on_block(core: BufferCore) -> None:
        try:
            problem = check(reader, core, expected[0], result)
        except Exception as exc:  # a stale or invalid read is a finding, not a crash
            problem = f"message {expected[0]}: {type(exc).__name__}: {exc}"
        if problem:
            result["errors"].append(problem)
        result["verified"] += problem is None
        released_by = time.monotonic() + 2.0  # CUDA leases go back asynchronously: ack once ours is gone
        while reader.stats()["leases_held"] and time.monotonic() < released_by:
            time.sleep(0.0002)
        acks.publish(String(data=f"{name} {expected[0]}"))
        expected[0] += 1

    node.create_subscription(BufferCore, f"{prefix}_blocks", on_block, qos)
    deadline = time.monotonic() + 150
    while expected[0] < count and time.monotonic() < deadline:
        if expected[0] == 0:
            acks.publish(String(data=f"{name} -1"))
        rclpy.spin_once(node, timeout_sec=0.05)
    time.sleep(0.2)  # let the last ack leave
    result["stats"] = reader.stats()
    node.destroy_node()
    rclpy.shutdown()
    return result


def dds_publisher(count: int, subscribers: int) -> None:
    pool = BlockManager(8 << 20, block_count=4, memory="host", reuse_delay=0)

    def fill(block, seq, extra):
        fill_pattern(block.view((pool.block_size // 8,), np.uint64), seq)

    facts = flow_controlled_publisher(pool, count, subscribers, fill, "core_test")
    print(json.dumps(facts), flush=True)
    pool.close()


def dds_subscriber(name: str, count: int) -> None:
    def check(reader, core, seq, result):
        with reader.read(core) as handle:
            words = handle.view((handle.byte_size // 8,), np.uint64)
            result["readonly"] = result.get("readonly", True) and not words.flags.writeable
            memfd = "/memfd:ros2_cuda_ipc" in mapping_of(words.ctypes.data)
            result["memfd_mapping"] = result.get("memfd_mapping", True) and memfd
            return check_pattern(words, seq)

    print(json.dumps(acking_subscriber(name, count, check, "core_test")), flush=True)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "hold":
        hold()
    elif role == "publish-and-wait":
        publish_and_wait()
    elif role == "dds-publisher":
        dds_publisher(int(args[0]), int(args[1]))
    elif role == "dds-subscriber":
        dds_subscriber(args[0], int(args[1]))
    else:
        raise SystemExit(f"unknown role {role!r}; pid {os.getpid()}")

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


def dds_publisher(count: int, subscribers: int) -> None:
    import rclpy
    from rclpy.qos import QoSProfile, QoSReliabilityPolicy
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("core_test_publisher")
    qos = QoSProfile(depth=100, reliability=QoSReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(BufferCore, "core_test_blocks", qos)
    acked: dict[str, int] = {}
    node.create_subscription(String, "core_test_acks", lambda m: acked.__setitem__(*_ack(m.data)), qos)
    pool = BlockManager(8 << 20, block_count=4, memory="host", reuse_delay=0)
    deadline = time.monotonic() + 60
    while len(acked) < subscribers and time.monotonic() < deadline:  # each subscriber says -1 when ready
        rclpy.spin_once(node, timeout_sec=0.05)
    sizes = set()
    for seq in range(count):
        while seq - min(acked.values(), default=-1) > pool.block_count and time.monotonic() < deadline + 120:
            rclpy.spin_once(node, timeout_sec=0.01)
        block = pool.acquire_for_publish(timeout=5.0)
        if block is None:
            raise SystemExit(f"no free block for message {seq}: {pool.stats()}")
        with block:
            fill_pattern(block.view((pool.block_size // 8,), np.uint64), seq)
            core = block.prepare_publish()
        from rclpy.serialization import serialize_message

        sizes.add(len(serialize_message(core)))
        pub.publish(core)
        rclpy.spin_once(node, timeout_sec=0)
    while min(acked.values()) < count - 1 and time.monotonic() < deadline + 180:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(json.dumps({"stats": pool.stats(), "message_bytes": sorted(sizes)}), flush=True)
    pool.close()
    node.destroy_node()
    rclpy.shutdown()


def _ack(text: str) -> tuple[str, int]:
    name, seq = text.split()
    return name, int(seq)


def dds_subscriber(name: str, count: int) -> None:
    import rclpy
    from rclpy.qos import QoSProfile, QoSReliabilityPolicy
    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node(f"core_test_{name}")
    qos = QoSProfile(depth=100, reliability=QoSReliabilityPolicy.RELIABLE)
    acks = node.create_publisher(String, "core_test_acks", qos)
    reader = Reader()
    result = {"verified": 0, "errors": [], "readonly": True, "memfd_mapping": True}
    expected = [0]

    def on_block(core: BufferCore) -> None:
        with reader.read(core) as handle:
            words = handle.view((handle.byte_size // 8,), np.uint64)
            problem = check_pattern(words, expected[0])
            if problem:
                result["errors"].append(problem)
            result["readonly"] &= not words.flags.writeable
            result["memfd_mapping"] &= "/memfd:ros2_cuda_ipc" in mapping_of(words.ctypes.data)
            result["verified"] += problem is None
            del words
        acks.publish(String(data=f"{name} {expected[0]}"))
        expected[0] += 1

    node.create_subscription(BufferCore, "core_test_blocks", on_block, qos)
    deadline = time.monotonic() + 240
    while expected[0] < count and time.monotonic() < deadline:
        if expected[0] == 0:
            acks.publish(String(data=f"{name} -1"))
        rclpy.spin_once(node, timeout_sec=0.05)
    result["stats"] = reader.stats()
    print(json.dumps(result), flush=True)
    node.destroy_node()
    rclpy.shutdown()


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

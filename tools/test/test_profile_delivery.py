"""profile_delivery: every row delivers every frame with its boundaries in time order, and Ctrl-C ends it with 0.

Real processes (the tool starts its publisher child per row); no timing is asserted, only the order of
each frame's stamps, which is what makes the split's boundaries mean what the tool says they mean.
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TOOL = str(Path(__file__).resolve().parents[1] / "profile_delivery.py")
sys.path.insert(0, str(Path(TOOL).parent))
import profile_delivery  # noqa: E402

COUNT = 6

#: The boundaries each row stamps, in the order they must happen.
ORDER = {
    "dds-typed": ("stamp", "source", "received", "woken", "take start", "take end", "callback", "deserialized"),
    "dds-raw": ("stamp", "source", "received", "woken", "take start", "take end", "callback", "deserialized"),
    "dds-struct": ("stamp", "serialized", "source", "received", "woken", "take start", "take end", "callback",
                   "deserialized"),
    "dds-waitset": ("stamp", "source", "received", "woken", "take end", "deserialized"),
    "socket-cdr": ("stamp", "serialized", "recv", "woken", "callback", "deserialized"),
    "socket-struct": ("stamp", "serialized", "recv", "woken", "callback", "deserialized"),
    "socket-direct": ("stamp", "serialized", "recv", "deserialized"),
}


@pytest.mark.long
def test_every_row_gets_every_frame_with_its_boundaries_in_order(tmp_path):
    out = tmp_path / "stamps.json"
    result = subprocess.run([sys.executable, TOOL, "--rate", "20", "--count", str(COUNT), "--json", str(out)],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert "frames not received" not in result.stdout
    rows = json.loads(out.read_text())
    assert set(rows) == set(ORDER)
    for row, frames in rows.items():
        assert len(frames) == COUNT, row
        for stamps in frames:
            assert all(name in stamps for name in ORDER[row]), (row, stamps)
            times = [stamps[name] for name in ORDER[row]]
            assert times == sorted(times), (row, stamps)
        # The publisher alternates publish(msg) and serialize + publish(bytes) on the DDS rows.
        published = {"published/typed" in stamps for stamps in frames}
        assert published == ({True, False} if row in ("dds-typed", "dds-raw", "dds-waitset") else {False}), row
    assert "stamp -> callback" in result.stdout


def test_unknown_arguments_and_events_with_socket_rows_are_refused():
    for args in (["--bogus"], ["--executor", "events", "--rows", "socket-struct"], ["--count", "0"],
                 ["--rate", "nan"], ["--rate", "inf"]):
        result = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, args


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def test_sigint_ends_it_with_0_and_takes_its_publisher_down():
    tool = subprocess.Popen([sys.executable, TOOL, "--count", "100000", "--rows", "dds-typed"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _children(tool.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    children = _children(tool.pid)
    assert children, "the publisher child never started"
    time.sleep(3)  # into the measuring loop
    tool.send_signal(signal.SIGINT)
    _, stderr = tool.communicate(timeout=30)
    assert tool.returncode == 0, stderr
    for child in children:  # killed and reaped by the tool on its way out
        assert not Path(f"/proc/{child}").exists(), child


def test_the_struct_codec_reads_and_writes_what_rclpy_does():
    from rclpy.serialization import deserialize_message, serialize_message

    from ros2_cuda_ipc_msgs.msg import GpuImage

    for seq, frame_id, encoding in ((7, "7", "rgba8"), (123456, "123456", ""), (3, "", "x"), (5, "abc", "mono16")):
        msg = profile_delivery._descriptor(seq)
        profile_delivery._set_stamp(msg, 1_234_567_890_123_456_789 + seq)
        msg.header.frame_id, msg.encoding, msg.dtype = frame_id, encoding, seq % 8
        core = msg.core
        core.pool_id, core.event_handle = list(range(16)), [(seq + i) % 256 for i in range(64)]
        core.publisher_pid, core.device_id, core.memory = 4242 + seq, seq % 3, seq % 2
        # rclpy leaves CDR padding uninitialized, so compare what each side reads, not the bytes
        assert deserialize_message(profile_delivery._cdr_pack(msg), GpuImage) == msg
        back = profile_delivery.CdrUnpacked(serialize_message(msg))
        assert back.fields == (core.pool_id.tobytes(), core.block_id, core.uid, core.publisher_pid, core.memory,
                               core.device_id, core.event_handle.tobytes(), core.byte_size, msg.dtype,
                               tuple(msg.shape.tolist()), tuple(msg.strides.tolist()))
        assert (back.frame_id, back.encoding, back.socket_path, back.stamp) == (
            frame_id, encoding, core.socket_path, (msg.header.stamp.sec, msg.header.stamp.nanosec))

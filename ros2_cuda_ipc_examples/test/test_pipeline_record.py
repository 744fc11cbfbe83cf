"""``pipeline fanout --record BAG``: the camera's frames land in a rosbag2 bag that rosbags reads, each one the
picture the camera drew (its frame number found in it), while the pipeline runs as it does without it."""

from __future__ import annotations

import numpy as np
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from ros2_cuda_ipc_examples.nodes.scene import Probe
from ros2_cuda_ipc_examples.pipelines.definitions import PipelineOptions, fanout
from ros2_cuda_ipc_examples.pipelines.runner import run_pipeline

FRAMES = 20


def test_fanout_record_writes_the_cameras_frames_into_a_bag(tmp_path):
    options = PipelineOptions(width=160, height=120, fps=8.0, memory="host", frames=FRAMES, namespace="/fanout_record",
                              out_dir=tmp_path, block_count=8)
    bag = tmp_path / "bag"
    summary = run_pipeline(fanout(options), options, stream=None, record=bag)
    assert summary["ok"] and set(summary["exit_codes"].values()) == {0}, summary["exit_codes"]
    log = (tmp_path / "logs" / "bag_record.log").read_text()
    written = int(next(line for line in log.splitlines() if line.startswith("/fanout_record/image")).split()[2])
    types = get_typestore(Stores.ROS2_KILTED)
    probe = Probe.for_image(120, 160)
    seqs = []
    with Reader(bag) as reader:
        assert [c.msgtype for c in reader.connections] == ["sensor_msgs/msg/Image"]
        for connection, _, raw in reader.messages():
            image = types.deserialize_cdr(raw, connection.msgtype)
            pixels = np.asarray(image.data).reshape(image.height, image.width, -1)[:, :, :3]
            seq, matches = probe.check(pixels[probe.ys, probe.xs])
            assert matches, f"message {len(seqs)} is not a camera frame"
            seqs.append(seq)
    # The camera starts once its three consumers and the recorder subscribe: every frame is in the bag, in order.
    assert len(seqs) == written == FRAMES
    assert seqs == sorted(set(seqs))

"""Test peer (not shipped): a node run by core's ``run_nodes`` whose timer makes garbage at every tick while the
collector runs at almost every allocation (threshold 1) with the GC-pause callback counting; prints ``ready``
once spinning and, after the stop signal, ``stopped after N collections``."""

import gc

from ros2_cuda_ipc_core import run_nodes
from ros2_cuda_ipc_examples.nodes.frame_stats import gc_pauses


def make_nodes():
    import rclpy

    node = rclpy.create_node("gc_pressure")

    def churn() -> None:
        for _ in range(200):
            garbage: list = []
            garbage.append(garbage)

    node.create_timer(0.001, churn)
    node.create_timer(0.2, lambda: print("ready", flush=True))
    return [node]


pauses = gc_pauses()
gc.set_threshold(1)
code = run_nodes(make_nodes)
gc.set_threshold(700)
print(f"stopped after {pauses.count} collections", flush=True)
raise SystemExit(code)

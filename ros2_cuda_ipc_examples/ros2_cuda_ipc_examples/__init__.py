"""Composable example nodes, a Python component container, pipelines, the demo and the benchmark of ros2_cuda_ipc."""

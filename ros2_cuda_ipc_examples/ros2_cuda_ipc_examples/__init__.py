"""Example pipelines, demo and benchmark for ros2_cuda_ipc."""

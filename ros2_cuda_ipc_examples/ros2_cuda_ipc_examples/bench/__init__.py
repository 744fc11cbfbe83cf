"""The pieces of ``benchmark``: what is measured (cases), how frames travel (transports), where the
bytes are touched (array libraries), the two processes (producer, consumer) and the reports.

``ros2_cuda_ipc_examples.benchmark`` is the command; this package is its implementation.
"""

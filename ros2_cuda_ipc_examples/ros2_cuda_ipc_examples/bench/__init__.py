"""Measurement: ``benchmark`` (ros2_cuda_ipc against ``sensor_msgs`` over DDS) and its pieces, and ``soak``.

``benchmark``'s pieces: what is measured (cases), how frames travel (transports), where the bytes are
touched (array libraries), the two processes (producer, consumer) and the reports.
"""

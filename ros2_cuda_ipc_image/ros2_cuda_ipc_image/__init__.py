"""Typed zero-copy images over ros2_cuda_ipc: ImagePublisher, ImageReader and the sensor_msgs/Image bridge."""

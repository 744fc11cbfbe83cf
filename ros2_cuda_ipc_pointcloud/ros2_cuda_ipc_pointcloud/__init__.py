"""Typed zero-copy point clouds over ros2_cuda_ipc and the sensor_msgs/PointCloud2 bridge."""

"""Typed zero-copy point clouds over ros2_cuda_ipc: PointCloudPublisher, PointCloudReader and the sensor_msgs/PointCloud2 bridge."""

"""The example components: ordinary rclpy nodes, each loadable by ``ros2_cuda_ipc_examples::Class`` name.

Sources (``camera``, ``lidar``) draw a scene a consumer can check frame by frame; consumers
(``preprocess``, ``inference``, ``encoder``, ``preview``, ``voxel_node``, ``cloud_preview``) read it where it
lies.  ``pipeline_node``, ``source_node`` and ``consumer`` are their base classes; ``scene``, ``lidar_scene``,
``arrays`` and ``png`` the drawing, checking and array-library helpers they share.
"""

"""Examples of ros2_cuda_ipc, in three rooms.

``nodes``: the example components (a synthetic camera and LiDAR, preprocessing, inference, an encoder,
previews, voxel downsampling), their base classes and the scenes they draw and check.
``pipelines``: the pipelines those nodes make, the runner with its live table, and the demo.
``bench``: the latency benchmark against ``sensor_msgs`` and the soak test.
The tools a user runs against their own topics (the component container, ...) are in ``ros2_cuda_ipc_tools``.
"""

import ros2_cuda_ipc_core  # noqa: F401  (first: in an executable, a stop from here on is a clean exit 0: core.startup)

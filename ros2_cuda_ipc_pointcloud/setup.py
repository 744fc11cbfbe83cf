from setuptools import find_packages, setup

PACKAGE = "ros2_cuda_ipc_pointcloud"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["py.typed"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    extras_require={"test": ["pytest", "hypothesis"]},
    zip_safe=False,
    maintainer="ros2_cuda_ipc maintainers",
    maintainer_email="maintainers@ros2-cuda-ipc.dev",
    description="Typed zero-copy point clouds over ros2_cuda_ipc and the sensor_msgs/PointCloud2 bridge.",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "gpu_to_pointcloud2 = ros2_cuda_ipc_pointcloud.nodes:gpu_to_pointcloud2_main",
        "pointcloud2_to_gpu = ros2_cuda_ipc_pointcloud.nodes:pointcloud2_to_gpu_main",
        "voxel_downsample_example = ros2_cuda_ipc_pointcloud.voxel_example:main",
    ], "ros2_cuda_ipc.components": [  # loadable by the examples' component container
        "ros2_cuda_ipc_pointcloud::GpuToPointCloud2 = ros2_cuda_ipc_pointcloud.nodes:GpuToPointCloud2",
        "ros2_cuda_ipc_pointcloud::PointCloud2ToGpu = ros2_cuda_ipc_pointcloud.nodes:PointCloud2ToGpu",
    ]},
)

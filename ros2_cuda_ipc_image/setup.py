from setuptools import find_packages, setup

PACKAGE = "ros2_cuda_ipc_image"

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
    description="Typed zero-copy images over ros2_cuda_ipc: ImagePublisher, ImageReader and the sensor_msgs/Image bridge.",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "gpu_to_image = ros2_cuda_ipc_image.nodes:gpu_to_image_main",
        "image_to_gpu = ros2_cuda_ipc_image.nodes:image_to_gpu_main",
    ], "ros2_cuda_ipc.components": [  # loadable by the examples' component container
        "ros2_cuda_ipc_image::GpuToImage = ros2_cuda_ipc_image.nodes:GpuToImage",
        "ros2_cuda_ipc_image::ImageToGpu = ros2_cuda_ipc_image.nodes:ImageToGpu",
    ]},
)

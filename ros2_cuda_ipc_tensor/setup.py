from setuptools import find_packages, setup

PACKAGE = "ros2_cuda_ipc_tensor"

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
    extras_require={"test": ["pytest", "hypothesis"], "torch": ["torch"]},
    zip_safe=False,
    maintainer="ros2_cuda_ipc maintainers",
    maintainer_email="maintainers@ros2-cuda-ipc.dev",
    description="Zero-copy N-d tensors over ros2_cuda_ipc: TensorPublisher, TensorReader, the torch_conversions "
                "names and the std_msgs/*MultiArray bridge.",
    license="Apache-2.0",
)

from setuptools import find_packages, setup

PACKAGE = "ros2_cuda_ipc_tools"

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
    extras_require={
        "test": ["pytest", "hypothesis"],
        # The viewer's GL context (moderngl: EGL offscreen, any current context), window and text / PNG.
        "viewer": ["moderngl>=5.8", "glfw>=2.5", "pillow>=10.1"],
    },
    zip_safe=False,
    maintainer="ros2_cuda_ipc maintainers",
    maintainer_email="maintainers@ros2-cuda-ipc.dev",
    description="The tools a user runs with ros2_cuda_ipc topics: the component container and its runner.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "bag_play = ros2_cuda_ipc_tools.bag.play:main",
            "bag_record = ros2_cuda_ipc_tools.bag.record:main",
            "container = ros2_cuda_ipc_tools.components.container:main",
            "run_component = ros2_cuda_ipc_tools.components.run_component:main",
            "viewer = ros2_cuda_ipc_tools.viewer.cli:main",
            "cuda_ipc_top = ros2_cuda_ipc_tools.top.main:main",
        ],
        "ros2_cuda_ipc.components": [
            "ros2_cuda_ipc_tools::Viewer = ros2_cuda_ipc_tools.viewer.node:Viewer",
        ],
    },
)

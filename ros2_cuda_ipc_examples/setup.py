from setuptools import find_packages, setup

PACKAGE = "ros2_cuda_ipc_examples"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["py.typed"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", ["launch/fanout.launch.py"]),
    ],
    install_requires=["setuptools"],
    extras_require={"test": ["pytest", "hypothesis"]},
    zip_safe=False,
    maintainer="ros2_cuda_ipc maintainers",
    maintainer_email="maintainers@ros2-cuda-ipc.dev",
    description="Example pipelines, demo and benchmark for ros2_cuda_ipc.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "demo = ros2_cuda_ipc_examples.pipelines.demo:console_main",
            "benchmark = ros2_cuda_ipc_examples.bench.benchmark:main",
            "pipeline = ros2_cuda_ipc_examples.pipelines.runner:console_main",
            "synthetic_camera = ros2_cuda_ipc_examples.nodes.camera:main",
            "preprocess = ros2_cuda_ipc_examples.nodes.preprocess:main",
            "inference_like = ros2_cuda_ipc_examples.nodes.inference:main",
            "encoder_like = ros2_cuda_ipc_examples.nodes.encoder:main",
            "preview = ros2_cuda_ipc_examples.nodes.preview:main",
            "synthetic_lidar = ros2_cuda_ipc_examples.nodes.lidar:main",
            "voxel_downsample = ros2_cuda_ipc_examples.nodes.voxel_node:main",
            "cloud_preview = ros2_cuda_ipc_examples.nodes.cloud_preview:main",
            "soak = ros2_cuda_ipc_examples.bench.soak:main",
            "benchmark_multicam = ros2_cuda_ipc_examples.bench.multicam:console_main",
        ],
        "ros2_cuda_ipc.components": [
            "ros2_cuda_ipc_examples::SyntheticCamera = ros2_cuda_ipc_examples.nodes.camera:SyntheticCamera",
            "ros2_cuda_ipc_examples::Preprocess = ros2_cuda_ipc_examples.nodes.preprocess:Preprocess",
            "ros2_cuda_ipc_examples::InferenceLike = ros2_cuda_ipc_examples.nodes.inference:InferenceLike",
            "ros2_cuda_ipc_examples::EncoderLike = ros2_cuda_ipc_examples.nodes.encoder:EncoderLike",
            "ros2_cuda_ipc_examples::Preview = ros2_cuda_ipc_examples.nodes.preview:Preview",
            "ros2_cuda_ipc_examples::SyntheticLidar = ros2_cuda_ipc_examples.nodes.lidar:SyntheticLidar",
            "ros2_cuda_ipc_examples::VoxelDownsample = ros2_cuda_ipc_examples.nodes.voxel_node:VoxelDownsample",
            "ros2_cuda_ipc_examples::CloudPreview = ros2_cuda_ipc_examples.nodes.cloud_preview:CloudPreview",
        ],
    },
)

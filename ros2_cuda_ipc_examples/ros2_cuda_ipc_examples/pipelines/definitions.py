"""The example pipelines, as lists of components: what the runner, the demo and the launch file start.

``fanout``: a camera feeding preprocessing -> inference, an encoder, and a preview (the only CPU
copy). ``lidar``: a LiDAR -> GPU voxel downsampling -> a cloud preview (the only CPU copy).
``hop``: a camera and one encoder, through ros2_cuda_ipc or through ``sensor_msgs/Image`` (the copy
a process boundary costs without it): the demo's comparison. ``multicam``: several cameras, each read
by several encoders, through either: the benchmark's multi-camera case.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ros2_cuda_ipc_core import DEFAULT_REUSE_DELAY
from ros2_cuda_ipc_tools import ComponentSpec

from ..nodes.scene import MIN_HEIGHT, MIN_WIDTH

__all__ = ["DEFAULT_SIZES", "ELEMENT_BYTES", "MAX_FRAME_BYTES", "MIN_SIZES", "PIPELINES", "Pipeline", "PipelineOptions",
           "fanout", "hop", "lidar", "multicam"]

_EXAMPLES = "ros2_cuda_ipc_examples::"


@dataclass(frozen=True)
class PipelineOptions:
    """What every pipeline is started with."""

    width: int = 1920
    height: int = 1080
    fps: float = 30.0
    memory: str = "host"  # resolved already: 'cuda' or 'host'
    frames: int = 0  # 0: no limit
    seconds: float = 0.0  # 0: no limit
    namespace: str = "/fanout"
    out_dir: Path = Path("pipeline-output")
    block_count: int = 4  # blocks of each publisher's pool
    reuse_delay: float = DEFAULT_REUSE_DELAY  # seconds before a published block is reused
    tensor_dtype: str = "float16"  # of the NCHW tensor Preprocess sends InferenceLike: float16, bfloat16, float32
    cuda_wait: str = "auto"  # how every node process's threads wait for the GPU (core's CUDA_WAITS)

    @property
    def pool_parameters(self) -> dict[str, object]:
        """The parameters of every node that publishes from a pool of its own."""
        return {"block_count": self.block_count, "reuse_delay": float(self.reuse_delay)}


@dataclass(frozen=True)
class Pipeline:
    name: str
    components: list[ComponentSpec]

    @property
    def node_names(self) -> list[str]:
        return [spec.name or spec.plugin for spec in self.components]

    @property
    def source(self) -> str:
        """The first node: the one that makes the frames."""
        return self.node_names[0]


def _camera(options: PipelineOptions, subscribers: int, **extra: object) -> ComponentSpec:
    return ComponentSpec(f"{_EXAMPLES}SyntheticCamera", "camera", options.namespace, {
        "width": options.width, "height": options.height, "fps": float(options.fps), "memory": options.memory,
        "frames": options.frames, "seconds": float(options.seconds), "wait_for_subscribers": subscribers,
        **options.pool_parameters, **extra})


def fanout(options: PipelineOptions) -> Pipeline:
    """camera -> preprocess -> inference; camera -> encoder; camera -> preview (writes preview.png).

    Preprocess sends InferenceLike a ``GpuTensor`` (1, 3, 224, 224) of ``options.tensor_dtype``; InferenceLike
    publishes its logits as one too."""
    ns = options.namespace
    return Pipeline("fanout", [
        _camera(options, 3),
        ComponentSpec(f"{_EXAMPLES}Preprocess", "preprocess", ns,
                      {**options.pool_parameters, "wait_for_subscribers": 1, "dtype": options.tensor_dtype}),
        ComponentSpec(f"{_EXAMPLES}InferenceLike", "inference", ns),
        ComponentSpec(f"{_EXAMPLES}EncoderLike", "encoder", ns),
        ComponentSpec(f"{_EXAMPLES}Preview", "preview", ns, {"snapshot_path": str(options.out_dir.resolve() / "preview.png")}),
    ])


def hop(options: PipelineOptions, transport: str = "ipc") -> Pipeline:
    """camera -> encoder; ``transport="sensor_msgs"``: a download, DDS serialization and an upload per frame."""
    return Pipeline("hop", [
        _camera(options, 1, transport=transport),
        ComponentSpec(f"{_EXAMPLES}EncoderLike", "encoder", options.namespace,
                      {"transport": transport, "memory": options.memory}),
    ])


def multicam(options: PipelineOptions, transport: str = "ipc", cameras: int = 4, readers: int = 3) -> Pipeline:
    """``cameras`` cameras (``camera0``...), each on its own topic ``cam<i>/image`` read by ``readers`` encoders
    (``encoder<i>_<j>``), through ros2_cuda_ipc (``ipc``; ``ipc-direct``: the readers with ``delivery=direct``) or
    ``sensor_msgs/Image``."""
    wire = "ipc" if transport == "ipc-direct" else transport
    delivery = "direct" if transport == "ipc-direct" else "executor"
    components = []
    for i in range(cameras):
        topic = {"image": f"cam{i}/image"}
        camera = _camera(options, readers, transport=wire)
        components.append(ComponentSpec(camera.plugin, f"camera{i}", options.namespace, camera.parameters, topic))
        components += [ComponentSpec(f"{_EXAMPLES}EncoderLike", f"encoder{i}_{j}", options.namespace,
                                     {"transport": wire, "memory": options.memory, "delivery": delivery}, topic)
                       for j in range(readers)]
    return Pipeline("multicam", components)


def lidar(options: PipelineOptions) -> Pipeline:
    """lidar -> voxel -> preview (writes preview.png, seen from above); width x height is columns x rings."""
    ns = options.namespace
    return Pipeline("lidar", [
        ComponentSpec(f"{_EXAMPLES}SyntheticLidar", "lidar", ns, {
            "columns": options.width, "rings": options.height, "fps": float(options.fps), "memory": options.memory,
            "frames": options.frames, "seconds": float(options.seconds), "wait_for_subscribers": 1,
            **options.pool_parameters}),
        ComponentSpec(f"{_EXAMPLES}VoxelDownsample", "voxel", ns, {**options.pool_parameters, "wait_for_subscribers": 1}),
        ComponentSpec(f"{_EXAMPLES}CloudPreview", "preview", ns,
                      {"snapshot_path": str(options.out_dir.resolve() / "preview.png")}),
    ])


PIPELINES = {"fanout": fanout, "lidar": lidar}
#: Frame size (width x height; a LiDAR's columns x rings) and rate when none is given, and the smallest size.
DEFAULT_SIZES = {"fanout": ((1920, 1080), 30.0), "lidar": ((1024, 64), 10.0), "multicam": ((1920, 1080), 30.0)}
MIN_SIZES = {"fanout": (MIN_WIDTH, MIN_HEIGHT), "lidar": (8, 1), "multicam": (MIN_WIDTH, MIN_HEIGHT)}
#: Bytes of a frame's element (an rgb8 pixel; a LiDAR's xyzi point), and the largest frame a pipeline is started
#: with: every publisher's pool holds several, so a size typed with a zero too many is refused before any start.
ELEMENT_BYTES = {"fanout": 3, "lidar": 16, "multicam": 3}
MAX_FRAME_BYTES = 1 << 28

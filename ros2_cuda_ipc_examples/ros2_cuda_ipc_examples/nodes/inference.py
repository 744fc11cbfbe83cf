"""``InferenceLike``: a small real network on the preprocessed ``GpuTensor``, timed per frame.

    ros2 run ros2_cuda_ipc_examples inference_like --ros-args -p model:=tiny

``model:=tiny`` (default) is two 3x3 stride-2 convolutions, global average pooling and a
10-way linear layer with fixed seeded weights: torch on the tensor where it lies (GPU or host),
or the same arithmetic in numpy where torch is not installed (it says so once). ``model:=mobilenet_v3_small``
runs torchvision's smallest classifier (random weights) and needs torch and torchvision.
Each message's logits, one row per image of its batch, are published as a ``GpuTensor`` (N, classes) float32
on ``logits`` (in the memory the input came in), and the first image's class index on ``class``
(``std_msgs/UInt32``).
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import numpy as np
from std_msgs.msg import UInt32

from ros2_cuda_ipc_core import NodeParameter
from ros2_cuda_ipc_tensor import TensorPublisher
from ros2_cuda_ipc_tools import run_component

from .arrays import ArrayBackend
from .pipeline_node import ParameterError
from .preprocess import IMAGENET_MEAN, IMAGENET_STD
from .scene import Probe
from .tensor_consumer import TensorConsumer

__all__ = ["InferenceLike", "TinyNet", "main"]

MODELS = ("tiny", "mobilenet_v3_small")
#: Images a logits message can carry before its publisher is made anew, larger.
_BATCH_CAPACITY = 8


class TinyNet:
    """conv 3->8 (3x3, stride 2) + ReLU, conv 8->16 (3x3, stride 2) + ReLU, mean over pixels, linear 16->10."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.conv1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) / np.sqrt(27)
        self.conv2 = rng.standard_normal((16, 8, 3, 3)).astype(np.float32) / np.sqrt(72)
        self.linear = rng.standard_normal((10, 16)).astype(np.float32) / 4

    def numpy(self, nchw: np.ndarray) -> np.ndarray:
        """Logits (N, 10) of a batch of (3, rows, cols) images, in numpy."""
        rows = []
        for chw in nchw:
            x = np.maximum(_conv3x3_stride2(chw.astype(np.float32), self.conv1), 0)
            x = np.maximum(_conv3x3_stride2(x, self.conv2), 0)
            rows.append(self.linear @ x.mean(axis=(1, 2)))
        return np.stack(rows).astype(np.float32)

    def torch_module(self, device: Any, dtype: Any) -> Any:
        import torch

        net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10, bias=False))
        with torch.no_grad():
            for layer, weights in zip((net[0], net[2], net[6]), (self.conv1, self.conv2, self.linear), strict=True):
                layer.weight.copy_(torch.from_numpy(weights))
        return net.to(device=device, dtype=dtype).eval()


def _conv3x3_stride2(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))[:, ::2, ::2]
    return np.einsum("chwij,ocij->ohw", windows, weights, optimize=True)


#: torch's CPU threads in a process with an InferenceLike (host frames); process-wide, as torch's setting is.
HOST_THREADS = 2


class InferenceLike(TensorConsumer):
    """Runs the network on each tensor from ``preprocessed``; latency is camera stamp to class on the host."""

    PARAMETERS: tuple[NodeParameter, ...] = (
        NodeParameter("model", "tiny", "tiny (numpy or torch) or mobilenet_v3_small (torchvision)"),
    )

    input_topic = "preprocessed"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("inference_like", **kwargs)
        self.model = self.parameter("model")
        if self.model not in MODELS:
            raise ParameterError(f"model {self.model!r} is not one of {', '.join(MODELS)}")
        self.has_torch = importlib.util.find_spec("torch") is not None
        if self.model == "mobilenet_v3_small" and (not self.has_torch or importlib.util.find_spec("torchvision") is None):
            raise ParameterError("model 'mobilenet_v3_small' needs torch and torchvision: pip install torch torchvision")
        if not self.has_torch:
            self.get_logger().info("torch is not installed: the tiny network runs in numpy (pip install torch for torch)")
        self.tiny = TinyNet()
        self._modules: dict[tuple[str, str], Any] = {}
        self._model_ms: list[float] = []
        self._classes = self.create_publisher(UInt32, "class", 10)
        self.logits: TensorPublisher | None = None  # made for the first message's memory and batch
        self._mean = np.array(IMAGENET_MEAN) * 255
        self._std = np.array(IMAGENET_STD) * 255
        if self.has_torch:
            self._warm_up()
        self.listen()

    def _warm_up(self) -> None:
        """Build the network where frames may come (the CPU for host frames, the GPU in each type Preprocess
        sends) and run it once, so the first frames do not wait for it (and go stale)."""
        import torch

        # A 224 x 224 batch of one is no work for a pool of threads: torch's default (one per core) made every
        # host frame wait for the whole machine, 1.2 s p50 beside eleven other test processes on the H200's
        # 16 cores (its first frames went stale); two threads keep a frame's work to milliseconds.
        torch.set_num_threads(min(HOST_THREADS, torch.get_num_threads()))
        probes = [torch.zeros((1, 3, 224, 224))]
        if "cuda" in self._backends:
            probes += [torch.zeros((1, 3, 224, 224), dtype=dtype, device="cuda")
                       for dtype in (torch.float32, torch.float16, torch.bfloat16)]
        for probe in probes:
            with torch.no_grad():
                self._module(probe)(probe)
        if "cuda" in self._backends:
            torch.cuda.synchronize()

    def _module(self, tensor: Any) -> Any:
        import torch

        dtype = tensor.dtype if tensor.is_cuda else torch.float32  # half convolutions want a GPU
        key = (str(tensor.device), str(dtype))
        if key not in self._modules:
            if self.model == "tiny":
                self._modules[key] = self.tiny.torch_module(tensor.device, dtype)
            else:
                torchvision: Any = importlib.import_module("torchvision")
                self._modules[key] = torchvision.models.mobilenet_v3_small(weights=None).to(tensor.device, dtype).eval()
        return self._modules[key]

    def process(self, image: Any, header: Any, encoding: str, arrays: ArrayBackend) -> None:
        started = time.perf_counter()
        logits: Any
        if self.has_torch:
            import torch

            if arrays.name == "numpy":  # a small host copy: torch takes no read-only numpy array
                nchw = torch.from_numpy(np.array(image))
            else:
                nchw = image if arrays.name == "torch" else torch.from_dlpack(image)
            module = self._module(nchw)
            with torch.no_grad():
                logits = module(nchw.to(next(module.parameters()).dtype)).float()
            label = int(logits[0].argmax())
        else:
            logits = self.tiny.numpy(np.asarray(arrays.download(image)))
            label = int(logits[0].argmax())
        self._model_ms.append((time.perf_counter() - started) * 1e3)
        self._logits_publisher(logits.shape, "cuda" if arrays.on_gpu else "host").publish_array(
            logits, arrays.stream, header)
        self._classes.publish(UInt32(data=label))
        self.counts["out"] += 1

    def _logits_publisher(self, shape: tuple[int, ...], memory: str) -> TensorPublisher:
        """The ``logits`` publisher for this memory, with room for a batch of ``shape[0]`` (a new one if not)."""
        publisher = self.logits
        if publisher is not None and (publisher.pool.memory != memory or publisher.layout.shape[0] < shape[0]
                                      or publisher.layout.shape[1:] != tuple(shape[1:])):
            publisher.close()
            publisher = None
        if publisher is None:
            capacity = (max(_BATCH_CAPACITY, int(shape[0])), *(int(n) for n in shape[1:]))
            publisher = TensorPublisher(self, "logits", shape=capacity, dtype=np.float32, dim_names=("N", "class"),
                                        memory=memory)  # type: ignore[arg-type]
        self.logits = publisher
        return publisher

    def probe_values(self, image: Any, probe: Probe, ys: Any, xs: Any, arrays: ArrayBackend) -> np.ndarray:
        normalized = arrays.download(arrays.astype(image[ys, xs], np.float32)).astype(np.float64)
        return normalized * self._std + self._mean

    def extra_stats(self) -> dict[str, Any]:
        recent, self._model_ms = self._model_ms, []
        output = "-" if self.logits is None else f"GpuTensor Nx{self.logits.layout.shape[1]} float32"
        return {**super().extra_stats(), "model": self.model, "torch": self.has_torch, "input": self.input,
                "output": output, "model_ms_p50": round(float(np.median(recent)), 3) if recent else None}

    def destroy_node(self) -> None:
        if getattr(self, "logits", None) is not None:  # None too for a node whose parameters were refused
            self.logits.close()  # type: ignore[union-attr]
            self.logits = None
        super().destroy_node()


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_component(InferenceLike, argv))


if __name__ == "__main__":
    main()

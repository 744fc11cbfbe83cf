"""Every component runs as its own process and in the container, and ends on SIGINT with exit code 0."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time

import pytest
from peers import own_lines
from processes import interrupt, start, wait_for_nodes
from rclpy.parameter import Parameter

from ros2_cuda_ipc_examples.nodes.arrays import cuda_unavailable_reason as unavailable_reason
from ros2_cuda_ipc_tools import CONFIGURATION_ERRORS, available_components, component_class

#: Each component, its node name here, and the parameters and remappings it starts with on a CPU machine
#: (the bridge nodes' sensor_msgs topics renamed: one process cannot have two types on one topic).
COMPONENTS = {
    "ros2_cuda_ipc_examples::SyntheticCamera": ("camera", ["memory:=host", "width:=160", "height:=120"], []),
    "ros2_cuda_ipc_examples::Preprocess": ("preprocess", [], []),
    "ros2_cuda_ipc_examples::InferenceLike": ("inference", [], []),
    "ros2_cuda_ipc_examples::EncoderLike": ("encoder", [], []),
    "ros2_cuda_ipc_examples::Preview": ("preview", [], []),
    "ros2_cuda_ipc_examples::SyntheticLidar": ("lidar", ["memory:=host", "rings:=16", "columns:=256"], []),
    "ros2_cuda_ipc_examples::VoxelDownsample": ("voxel", [], []),
    "ros2_cuda_ipc_examples::CloudPreview": ("cloud_preview", [], ["preview:=cloud_preview_out"]),
    "ros2_cuda_ipc_image::GpuToImage": ("gpu_to_image", [], ["gpu_image:=image", "image:=image_out"]),
    "ros2_cuda_ipc_image::ImageToGpu": ("image_to_gpu", [], ["image:=image_in", "gpu_image:=gpu_in"]),
}


def ros_args(name: str, namespace: str, params: list[str], remaps: list[str]) -> list[str]:
    return ["--ros-args", "-r", f"__node:={name}", "-r", f"__ns:={namespace}",
            *[arg for param in params for arg in ("-p", param)], *[arg for rule in remaps for arg in ("-r", rule)]]


def assert_clean_stop(code: int, err: str, what: str) -> None:
    assert code == 0, f"{what} exited with {code}:\n{err}"
    assert "Traceback" not in err, f"{what} printed a traceback:\n{err}"


def test_every_component_is_registered():
    assert set(COMPONENTS) <= set(available_components())


def test_each_component_as_its_own_process_stops_on_sigint(node):
    namespace = "/own_process"
    processes = {plugin: start("ros2_cuda_ipc_tools.components.run_component", plugin, *ros_args(name, namespace, *more))
                 for plugin, (name, *more) in COMPONENTS.items()}
    try:
        wait_for_nodes(node, [f"{namespace}/{name}" for name, *_ in COMPONENTS.values()], processes.values())
        time.sleep(1.0)  # a camera frame or two and a stats report: the nodes are working, not just constructed
        for plugin, process in processes.items():
            code, _, err = interrupt(process)
            assert_clean_stop(code, err, plugin)
    finally:
        for process in processes.values():
            process.kill()


def test_all_components_in_one_container_stop_on_sigint(node):
    namespace = "/composed"
    args = []
    for plugin, (name, params, remaps) in COMPONENTS.items():
        args += ["--load", plugin, "--name", name, "--namespace", namespace]
        args += [arg for param in params for arg in ("--param", param)]
        args += [arg for rule in remaps for arg in ("--remap", rule)]
    container = start("ros2_cuda_ipc_tools.components.container", *args, "--ros-args", "-r", "__ns:=/composed")
    try:
        wait_for_nodes(node, [f"{namespace}/{name}" for name, *_ in COMPONENTS.values()] + ["/composed/ComponentManager"],
                       [container])
        time.sleep(1.0)
        code, _, err = interrupt(container)
        assert_clean_stop(code, err, "container")
        assert err.count("loaded ros2_cuda_ipc_examples::") == 8
    finally:
        container.kill()


MODULES = ["camera", "preprocess", "inference", "encoder", "preview", "lidar", "voxel_node", "cloud_preview"]


def test_console_entry_prints_its_documentation():
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.camera", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Publishes frame after frame of Scene on image." in out.stdout
    assert "  width " in out.stdout and "(default: 1920)" in out.stdout  # from the node's parameter table


@pytest.mark.parametrize("module", MODULES)
def test_every_node_module_says_how_to_start_it(module):
    doc = importlib.import_module(f"ros2_cuda_ipc_examples.nodes.{module}").__doc__
    assert "ros2 run ros2_cuda_ipc_examples " in doc


BAD_PARAMETERS = [
    ("SyntheticCamera", {"fps": 0.0}, "fps must be a finite number > 0, not 0.0"),
    ("SyntheticCamera", {"frames": -1, "memory": "host"}, "frames must be a finite number >= 0, not -1"),
    ("SyntheticCamera", {"width": 100_000, "height": 100_000, "memory": "host"},
     "100000x100000 rgb8 is 30000000000 bytes a frame, more than the 256 MiB the scene draws"),
    ("SyntheticCamera", {"encoding": "mono8", "memory": "host"}, "encoding 'mono8' is not one of rgb8, bgr8, rgba8, bgra8"),
    ("SyntheticCamera", {"width": 10, "memory": "host"}, "below the smallest picture"),
    ("SyntheticCamera", {"memory": "gpu"}, "expected 'auto', 'cuda' or 'host'"),
    ("SyntheticCamera", {"width": "wide"}, "parameter width must be an integer, not 'wide'"),
    ("SyntheticCamera", {"block_count": 1, "memory": "host"}, "block_count must be at least 2"),
    ("SyntheticCamera", {"reuse_delay": -0.5, "memory": "host"}, "reuse_delay must be a finite number of seconds >= 0"),
    ("Preprocess", {"reuse_delay": float("nan")}, "reuse_delay must be a finite number of seconds >= 0, got nan"),
    ("VoxelDownsample", {"reuse_delay": "soon"}, "parameter reuse_delay must be a number, not 'soon'"),
    ("VoxelDownsample", {"block_count": 1}, "block_count must be at least 2"),
    ("Preprocess", {"dtype": "int8"}, "dtype ('int8') must be one of float16, bfloat16, float32"),
    ("InferenceLike", {"model": "resnet"}, "model 'resnet' is not one of tiny"),
    ("EncoderLike", {"downscale": 0}, "downscale must be at least 1"),
    ("Preview", {"rate": 0.0}, "rate must be a finite number > 0, not 0.0"),
    ("Preview", {"transport": "zenoh"}, "transport 'zenoh' is not one of ipc, sensor_msgs"),
    ("SyntheticLidar", {"rings": 0, "memory": "host"}, "at least 1 ring and 8 columns"),
    ("VoxelDownsample", {"voxel": 0.0}, "voxel must be a finite number > 0, not 0.0"),
    ("CloudPreview", {"margin": -1.0}, "margin must be a finite number >= 0, not -1.0"),
]


@pytest.mark.parametrize(("name", "parameters", "message"), BAD_PARAMETERS)
def test_bad_parameters_are_refused_by_name(node, name, parameters, message):
    node_class = component_class(f"ros2_cuda_ipc_examples::{name}")
    with pytest.raises(CONFIGURATION_ERRORS) as refusal:
        node_class(parameter_overrides=[Parameter(key, value=value) for key, value in parameters.items()])
    assert message in str(refusal.value)


def test_a_refused_parameter_ends_the_process_with_one_line_and_exit_code_2():
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.camera", "--ros-args", "-p", "fps:=0.0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert own_lines(out.stderr) == ["SyntheticCamera: fps must be a finite number > 0, not 0.0"]  # fps alone: before,
    # "fps (0.0) must be positive, frames (0), seconds (0.0), start_delay (1.0) and wait_for_subscribers not negative"


@pytest.mark.skipif(unavailable_reason(0) is None, reason="checks the message where there is no usable GPU")
def test_camera_on_cuda_without_a_gpu_says_why():
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_examples.nodes.camera", "--ros-args", "-p", "memory:=cuda"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "memory='cuda' cannot be used" in out.stderr and "Traceback" not in out.stderr

"""The fanout pipeline with ros2 launch: separate processes, or composed in the Python component container.

    ros2 launch ros2_cuda_ipc_examples fanout.launch.py                       # one process per node
    ros2 launch ros2_cuda_ipc_examples fanout.launch.py compose:=true         # one container process
    ros2 launch ros2_cuda_ipc_examples fanout.launch.py width:=3840 height:=2160 memory:=cuda

Composed, launch_ros starts the tools package's ``container`` executable and loads each node through
its ``~/_container/load_node`` service (served where ``composition_interfaces`` exists, as it does
wherever launch_ros does). Watch the nodes' reports with
``ros2 topic echo /fanout/pipeline_stats``; ``pipeline fanout`` shows them as a live table.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import ComposableNodeContainer, Node
from launch_ros.descriptions import ComposableNode

PACKAGE = "ros2_cuda_ipc_examples"
ARGUMENTS = {
    "compose": ("false", "true: every node in one container process"),
    "namespace": ("/fanout", "namespace of every node"),
    "memory": ("auto", "auto, cuda or host"),
    "width": ("1920", "camera width"),
    "height": ("1080", "camera height"),
    "fps": ("30.0", "camera frames per second"),
    "snapshot_path": ("preview.png", "where the preview node writes its PNG snapshot"),
    "tensor_dtype": ("float16", "the NCHW tensor preprocess sends inference: float16, bfloat16 or float32"),
}

#: (node name, executable, plugin class, parameters): the same nodes either way.
NODES = [
    ("camera", "synthetic_camera", "SyntheticCamera",
     {"memory": LaunchConfiguration("memory"), "width": LaunchConfiguration("width"),
      "height": LaunchConfiguration("height"), "fps": LaunchConfiguration("fps"), "wait_for_subscribers": 3}),
    ("preprocess", "preprocess", "Preprocess", {"wait_for_subscribers": 1, "dtype": LaunchConfiguration("tensor_dtype")}),
    ("inference", "inference_like", "InferenceLike", {}),
    ("encoder", "encoder_like", "EncoderLike", {}),
    ("preview", "preview", "Preview", {"snapshot_path": LaunchConfiguration("snapshot_path")}),
]


def generate_launch_description() -> LaunchDescription:
    namespace = LaunchConfiguration("namespace")
    compose = LaunchConfiguration("compose")
    separate = [Node(package=PACKAGE, executable=executable, name=name, namespace=namespace,
                     parameters=[parameters] if parameters else [], output="screen", condition=UnlessCondition(compose))
                for name, executable, _, parameters in NODES]
    composed = ComposableNodeContainer(
        name="fanout_container", namespace=namespace, package="ros2_cuda_ipc_tools", executable="container", output="screen",
        condition=IfCondition(compose),
        composable_node_descriptions=[
            ComposableNode(package=PACKAGE, plugin=f"{PACKAGE}::{plugin}", name=name, namespace=namespace,
                           parameters=[parameters] if parameters else [])
            for name, _, plugin, parameters in NODES])
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=text)
          for name, (default, text) in ARGUMENTS.items()),
        *separate,
        composed,
    ])

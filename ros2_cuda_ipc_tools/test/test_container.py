"""The component container: Python API, command line, pipeline files, and rclcpp's services where they exist."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import String

from ros2_cuda_ipc_tools.components.container import ComponentContainer, ComponentLoadError, ComponentSpec, read_pipeline_file
from ros2_cuda_ipc_tools.components.registry import UnknownComponentError

CAMERA = "ros2_cuda_ipc_examples::SyntheticCamera"
ENCODER = "ros2_cuda_ipc_examples::EncoderLike"
SMALL_HOST_CAMERA = {"memory": "host", "width": 128, "height": 96, "fps": 50.0}


@pytest.fixture()
def container(node):
    executor = SingleThreadedExecutor()
    container = ComponentContainer(executor, namespace="/api")
    executor.add_node(container)
    executor.add_node(node)
    yield container, executor
    container.destroy_node()
    executor.shutdown()


def spin_until(executor, done, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    return done()


def test_load_list_unload(container):
    container, _ = container
    camera = container.load(CAMERA, name="camera", namespace="/api", parameters=SMALL_HOST_CAMERA)
    encoder = container.load(ComponentSpec(ENCODER, name="encoder", namespace="/api", remappings={"image": "/api/image"}))
    assert [(c.unique_id, c.full_name) for c in container.components] == [(1, "/api/camera"), (2, "/api/encoder")]
    assert camera.node.get_parameter("width").value == 128
    container.unload(camera.unique_id)
    assert [c.full_name for c in container.components] == ["/api/encoder"]
    with pytest.raises(KeyError, match="no component with unique id 1; loaded: \\[2\\]"):
        container.unload(camera.unique_id)
    container.unload(encoder.unique_id)
    assert container.components == []


def test_unknown_name_lists_what_is_available(container):
    container, _ = container
    with pytest.raises(UnknownComponentError) as error:
        container.load("ros2_cuda_ipc_examples::Camera")
    message = str(error.value)
    assert "'ros2_cuda_ipc_examples::Camera'" in message
    assert CAMERA in message and "ros2_cuda_ipc_image::GpuToImage" in message


def test_refused_parameters_are_a_load_error(container):
    container, _ = container
    with pytest.raises(ComponentLoadError, match=r"SyntheticCamera could not be loaded: fps must be a finite number > 0, not -1"):
        container.load(CAMERA, parameters={"fps": -1.0})
    assert container.components == []


def test_components_in_one_container_read_through_the_same_process_path(container, node):
    container, executor = container
    frames = 12
    reports = {}
    node.create_subscription(String, "/api/pipeline_stats",
                             lambda msg: reports.__setitem__(json.loads(msg.data)["node"], json.loads(msg.data)), 10)
    container.load(ENCODER, name="encoder", namespace="/api")
    container.load(CAMERA, name="camera", namespace="/api",
                   parameters={**SMALL_HOST_CAMERA, "frames": frames, "wait_for_subscribers": 1, "start_delay": 0.2})
    assert spin_until(executor, lambda: reports.get("/api/encoder", {}).get("checked") == frames), reports
    encoder = reports["/api/encoder"]
    assert encoder["bad"] == encoder["stale"] == encoder["lost"] == 0
    assert encoder["same_process_reads"] == encoder["reads"] == frames


def test_command_line_refuses_an_unknown_component_at_once():
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_tools.components.container", "--load", "nope::Nope"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no component named 'nope::Nope'; available:" in out.stderr
    assert CAMERA in out.stderr and "Traceback" not in out.stderr
    assert time.monotonic() - started < 30


def test_command_line_options_need_a_load_first():
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_tools.components.container", "--param", "a:=1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--param must follow a --load" in out.stderr


def test_command_line_lists_components():
    out = subprocess.run([sys.executable, "-m", "ros2_cuda_ipc_tools.components.container", "--list"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and CAMERA in out.stdout.split()


RUN_COMPONENT = [sys.executable, "-m", "ros2_cuda_ipc_tools.components.run_component"]


def test_run_component_answers_help_and_refuses_what_it_cannot_run():
    helped = subprocess.run([*RUN_COMPONENT, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "package::Class" in helped.stdout and CAMERA in helped.stdout.split()
    for args, says in ((["--bogus"], "usage:"), (["nope::Nope"], "no component named 'nope::Nope'")):
        out = subprocess.run([*RUN_COMPONENT, *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)


def test_run_component_with_no_argument_says_to_give_a_component_and_lists_them():
    """Before: 'the following arguments are required: PACKAGE::CLASS, node_arguments'."""
    out = subprocess.run(RUN_COMPONENT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "give the component to run, as PACKAGE::CLASS; registered components" in out.stderr, out.stderr
    assert CAMERA in out.stderr.split() and "node_arguments" not in out.stderr


def test_pipeline_file(tmp_path):
    path = tmp_path / "pipeline.yaml"
    path.write_text("executor: multi\ncomponents:\n"
                    "  - plugin: ros2_cuda_ipc_examples::SyntheticCamera\n    name: camera\n"
                    "    parameters: {width: 640, memory: host}\n    remappings: {image: /cam/image}\n")
    specs, executor = read_pipeline_file(path)
    assert executor == "multi"
    assert specs == [ComponentSpec(CAMERA, "camera", None, {"width": 640, "memory": "host"}, {"image": "/cam/image"})]


@pytest.mark.parametrize(("text", "message"), [
    ("components: {}\n", "expected a mapping with a 'components' list"),
    ("components:\n  - name: camera\n", "component 0 needs 'plugin'"),
    ("components:\n  - plugin: a::B\n    params: {}\n", "got ['params']"),
    ("executor: many\ncomponents: []\n", "executor must be one of single, multi, events"),
    ("components: [\n", "while parsing"),
])
def test_bad_pipeline_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=None) as error:
        read_pipeline_file(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_services_where_composition_interfaces_exists(container):
    composition = pytest.importorskip("composition_interfaces.srv", reason="composition_interfaces is a ROS install's")
    container, executor = container
    node = container  # any node of the executor can be the client
    load = node.create_client(composition.LoadNode, "/api/ComponentManager/_container/load_node")
    listing = node.create_client(composition.ListNodes, "/api/ComponentManager/_container/list_nodes")
    unload = node.create_client(composition.UnloadNode, "/api/ComponentManager/_container/unload_node")

    def call(client, request):
        assert spin_until(executor, client.service_is_ready)
        future = client.call_async(request)
        assert spin_until(executor, future.done)
        return future.result()

    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue

    request = composition.LoadNode.Request(package_name="ros2_cuda_ipc_examples", plugin_name=CAMERA, node_name="cam",
                                           node_namespace="/api")
    request.parameters = [Parameter(name="memory", value=ParameterValue(type=ParameterType.PARAMETER_STRING,
                                                                       string_value="host"))]
    loaded = call(load, request)
    assert loaded.success and loaded.full_node_name == "/api/cam" and loaded.unique_id == 1
    missing = call(load, composition.LoadNode.Request(package_name="x", plugin_name="x::Y"))
    assert not missing.success and CAMERA in missing.error_message
    listed = call(listing, composition.ListNodes.Request())
    assert list(listed.full_node_names) == ["/api/cam"] and list(listed.unique_ids) == [1]
    assert call(unload, composition.UnloadNode.Request(unique_id=1)).success
    gone = call(unload, composition.UnloadNode.Request(unique_id=1))
    assert not gone.success and "no component with unique id 1" in gone.error_message


def test_a_component_that_raises_is_restarted_and_the_others_carry_on(node, monkeypatch):
    from ros2_cuda_ipc_examples.nodes.camera import SyntheticCamera
    from ros2_cuda_ipc_tools.components.restarting import RestartingExecutor

    emit, raised = SyntheticCamera.emit, []

    def emit_failing_once(self):  # the first camera's first frame raises, as a bug in a component would
        if not raised:
            raised.append(self)
            raise RuntimeError("a bug in the component")
        return emit(self)

    monkeypatch.setattr(SyntheticCamera, "emit", emit_failing_once)
    executor = RestartingExecutor()
    container = ComponentContainer(executor, namespace="/restarting")
    executor.add_node(container)
    try:
        first = container.load(CAMERA, name="camera", namespace="/restarting",
                               parameters={**SMALL_HOST_CAMERA, "start_delay": 0.0})
        other = container.load(CAMERA, name="other", namespace="/restarting",
                               parameters={**SMALL_HOST_CAMERA, "start_delay": 0.0})
        assert spin_until(executor, lambda: container.restarts.get("/restarting/camera") == 1)
        assert raised == [first.node]
        cameras = {c.full_name: c for c in container.components}
        assert set(cameras) == {"/restarting/camera", "/restarting/other"}
        again = cameras["/restarting/camera"]
        assert again.unique_id not in (first.unique_id, other.unique_id) and again.node is not first.node
        assert spin_until(executor, lambda: again.node.seq > 3)  # the new one sends frames
        assert other.node.seq > 3 and cameras["/restarting/other"] is other  # the other was never touched
    finally:
        container.destroy_node()
        executor.shutdown()


def test_a_callback_error_outside_any_component_still_ends_the_spin(node):
    from ros2_cuda_ipc_tools.components.restarting import RestartingExecutor

    executor = RestartingExecutor()
    container = ComponentContainer(executor, namespace="/restarting_not")
    executor.add_node(container)
    executor.add_node(node)
    timer = node.create_timer(0.01, lambda: 1 / 0)
    try:
        with pytest.raises(ZeroDivisionError):
            spin_until(executor, lambda: False, timeout=10.0)
    finally:
        node.destroy_timer(timer)
        container.destroy_node()
        executor.shutdown()


def test_ctrl_c_unloads_every_component_without_rosout_errors():
    """Before: 'Failed to publish log message to rosout: publisher's context is invalid' once per component."""
    import signal
    import time

    container = subprocess.Popen([sys.executable, "-m", "ros2_cuda_ipc_tools.components.container",
                                  "--load", "ros2_cuda_ipc_examples::SyntheticCamera", "--namespace", "/quiet_stop",
                                  "--param", "memory:=host", "--param", "width:=160", "--param", "height:=120",
                                  "--load", "ros2_cuda_ipc_examples::EncoderLike", "--namespace", "/quiet_stop"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert container.stdout is not None
    seen = []
    for line in container.stdout:  # both loaded: the container is spinning
        seen.append(line)
        if "as /quiet_stop/encoder_like" in line:
            break
    assert seen and "as /quiet_stop/encoder_like" in seen[-1], "".join(seen)
    time.sleep(1.0)  # a few frames through
    container.send_signal(signal.SIGINT)
    out, _ = container.communicate(timeout=30)
    assert container.returncode == 0, out
    assert "Failed to publish" not in out and "Traceback" not in out, out

"""Every executable of the workspace answers --help and --version, and refuses an unknown argument with exit code 2
before it starts anything; the bridges refuse parameters that cannot work, in one line, at start."""

import subprocess
import sys
import time
from importlib.metadata import entry_points

import pytest
from peers import own_lines, stop_in_turn

SCRIPTS = sorted((script.name, script.value) for script in entry_points(group="console_scripts")
                 if script.value.startswith("ros2_cuda_ipc"))
NODES = {"synthetic_camera", "preprocess", "inference_like", "encoder_like", "preview", "synthetic_lidar",
         "voxel_downsample", "cloud_preview", "gpu_to_image", "image_to_gpu", "gpu_to_pointcloud2", "pointcloud2_to_gpu"}


def run_script(target: str, *args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    """Run a console script ``module:function`` as its installed executable would, with ``args``."""
    module, function = target.split(":")
    code = f"import sys; sys.argv[0] = 'tool'; from {module} import {function} as main; sys.exit(main())"
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)
    return out, time.monotonic() - started


def test_every_node_and_tool_is_covered():
    assert {name for name, _ in SCRIPTS} >= NODES, SCRIPTS


@pytest.mark.parametrize(("name", "target"), SCRIPTS)
def test_help_prints_and_exits_0(name, target):
    out, _ = run_script(target, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage:") and "--version" in out.stdout
    assert "``" not in out.stdout and ":class:`" not in out.stdout and ":mod:`" not in out.stdout  # no raw markup
    if name in NODES:  # the parameter table, with defaults
        assert "parameters (set with --ros-args -p NAME:=VALUE):" in out.stdout and "(default: " in out.stdout


@pytest.mark.parametrize(("name", "target"), SCRIPTS)
def test_an_unknown_argument_is_refused_with_2(name, target):
    positional = {"run_component": ["ros2_cuda_ipc_examples::Preview"], "pipeline": ["fanout"], "bag_play": ["a.mcap"],
                  "bag_record": ["-o", "out", "image"]}
    out, took = run_script(target, *positional.get(name, []), "--no-such-option")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "unrecognized arguments: --no-such-option" in out.stderr and "Traceback" not in out.stderr
    print(f"{name}: refused in {took:.1f} s")  # the time to fail, shown with -s (no timing assertion: a loaded CI)


@pytest.mark.parametrize(("name", "target"), [script for script in SCRIPTS if script[0] in NODES | {"pipeline"}])
def test_version_names_the_package_version(name, target):
    out, _ = run_script(target, "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1][0].isdigit(), out.stdout


def test_node_help_lists_each_parameter_of_its_table_with_its_default():
    from ros2_cuda_ipc_core import parameter_table
    from ros2_cuda_ipc_examples.nodes.camera import SyntheticCamera

    out, _ = run_script("ros2_cuda_ipc_examples.nodes.camera:main", "-h")
    table = parameter_table(SyntheticCamera)
    assert {"fps", "width", "memory", "block_count", "stats_period"} <= set(table)
    for entry in table.values():  # as ROS spells the value: 'text', true / false, 30.0
        shown = repr(entry.default) if isinstance(entry.default, str) else str(entry.default).lower() \
            if isinstance(entry.default, bool) else str(entry.default)
        assert any(line.split()[:1] == [entry.name] and line.endswith(f"(default: {shown})")
                   for line in out.stdout.splitlines()), (entry, out.stdout)
    assert "(default: 30.0)" in out.stdout and "(default: 'camera')" in out.stdout  # the camera's own defaults


BRIDGE_REFUSALS = [
    ("ros2_cuda_ipc_image.nodes:image_to_gpu_main", "block_count:=0", "block_count must be at least 2, not 0"),
    ("ros2_cuda_ipc_image.nodes:image_to_gpu_main", "memory:=gpu", "memory 'gpu' is not one of auto, cuda, host"),
    ("ros2_cuda_ipc_pointcloud.nodes:pointcloud2_to_gpu_main", "reuse_delay:=-2", "reuse_delay must be a finite"),
    ("ros2_cuda_ipc_image.nodes:gpu_to_image_main", "max_rate:=-1", "max_rate must be a finite number >= 0"),
    ("ros2_cuda_ipc_image.nodes:gpu_to_image_main", "max_rate:=fast", "parameter max_rate must be a number"),
    ("ros2_cuda_ipc_pointcloud.nodes:gpu_to_pointcloud2_main", "stats_period:=0", "stats_period must be a finite number > 0"),
]


@pytest.mark.parametrize(("target", "parameter", "said"), BRIDGE_REFUSALS)
def test_a_bridge_refuses_a_parameter_that_cannot_work_in_one_line(target, parameter, said):
    out, _ = run_script(target, "--ros-args", "-p", parameter)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = own_lines(out.stderr)
    assert len(lines) == 1 and said in lines[0] and lines[0].split(":")[0] in ("ImageToGpu", "PointCloud2ToGpu",
                                                                             "GpuToImage", "GpuToPointCloud2"), out.stderr


def test_a_bridge_refuses_cuda_memory_without_a_gpu_at_start():
    from ros2_cuda_ipc_examples.nodes.arrays import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        pytest.skip("a usable GPU is here")
    out, _ = run_script("ros2_cuda_ipc_image.nodes:image_to_gpu_main", "--ros-args", "-p", "memory:=cuda")
    assert out.returncode == 2 and "memory 'cuda' cannot be used" in out.stderr, out.stderr


def test_a_bridge_takes_an_integer_where_a_number_is_meant():
    """max_rate:=5 is an integer to ROS; the bridge starts with it, spins (its stats line comes), stops on SIGINT with 0."""
    code = ("import sys; sys.argv[0] = 'gpu_to_image'; from ros2_cuda_ipc_image.nodes import gpu_to_image_main as m;"
            " sys.exit(m())")
    bridge = subprocess.Popen([sys.executable, "-c", code, "--ros-args", "-p", "max_rate:=5", "-p", "stats_period:=0.5"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert bridge.stdout is not None
    seen = []
    for line in bridge.stdout:  # the first stats line: the executor is spinning with max_rate 5.0
        seen.append(line)
        if "converted 0, skipped 0" in line:
            break
    bridge.send_signal(2)
    rest, _ = bridge.communicate(timeout=30)
    out = "".join(seen) + rest
    assert "converted 0, skipped 0" in out, out
    assert bridge.returncode == 0, out
    assert "InvalidParameterTypeException" not in out and "Traceback" not in out


def test_container_refuses_a_malformed_param_in_one_line_with_2():
    out, _ = run_script("ros2_cuda_ipc_tools.components.container:main", "--load",
                        "ros2_cuda_ipc_examples::SyntheticCamera", "--param", "memory=host")
    assert out.returncode == 2 and "--param 'memory=host' must look like name:=value" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("module", ["ros2_cuda_ipc_core.measure_cost", "ros2_cuda_ipc_pointcloud.measure_cost",
                                    "ros2_cuda_ipc_examples.bench.soak"])
def test_a_gpu_only_mode_is_refused_at_once_without_a_gpu(module):
    """Before: the point-cloud measure_cost hung for ever on a dead child, the core's printed a traceback."""
    from ros2_cuda_ipc_core.memory.cuda_driver import unavailable_reason

    if unavailable_reason(0) is None:
        pytest.skip("a usable GPU is here: --memory cuda runs")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", module, "--memory", "cuda"], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert out.returncode == 2 and "--memory cuda cannot be used here" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    print(f"{module}: refused in {took:.1f} s")


#: The example nodes' executables as two pipelines: executable, node name, parameters, remappings (the cloud preview's
#: output renamed: the image preview's has another type). The sources run until stopped.
EXECUTABLE_PIPELINES = [
    ("synthetic_camera", "camera", ["memory:=host", "width:=160", "height:=120", "fps:=10.0", "wait_for_subscribers:=3"],
     []),
    ("preprocess", "preprocess", ["wait_for_subscribers:=1"], []),
    ("inference_like", "inference", [], []),
    ("encoder_like", "encoder", [], []),
    ("preview", "preview", [], []),
    ("synthetic_lidar", "lidar", ["memory:=host", "rings:=16", "columns:=256", "wait_for_subscribers:=1"], []),
    ("voxel_downsample", "voxel", ["wait_for_subscribers:=1"], []),
    ("cloud_preview", "cloud_preview", [], ["preview:=cloud_preview_out"]),
]


def test_every_node_executable_runs_its_node_until_ctrl_c():
    """The main path of each example node's executable, as installed: the camera's and the LiDAR's frames go through
    the others (each checks them), then SIGINT ends every one with exit code 0.

    One at a time, the sources first: stopped all at once, their DDS participants' deletions can meet Fast DDS
    3.2's deadlock (docs/decisions.md; a CI run's voxel_downsample hung so, 30 s after its SIGINT)."""
    import json
    import shutil

    import rclpy
    from std_msgs.msg import String

    namespace = "/executables"
    children = {}
    for executable, name, parameters, remappings in EXECUTABLE_PIPELINES:
        path = shutil.which(executable)
        assert path is not None, f"{executable} is not on PATH"
        args = ["--ros-args", "-r", f"__node:={name}", "-r", f"__ns:={namespace}",
                *(arg for p in parameters for arg in ("-p", p)), *(arg for r in remappings for arg in ("-r", r))]
        children[name] = subprocess.Popen([path, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    checked: dict[str, int] = {}
    reports: dict[str, dict] = {}  # each node's last report, said whole for one that checked nothing

    def on_report(msg: String) -> None:
        report = json.loads(msg.data)
        name = report["node"].rsplit("/", 1)[-1]
        checked[name], reports[name] = report["checked"], report

    consumers = [name for _, name, _, _ in EXECUTABLE_PIPELINES if name not in ("camera", "lidar")]
    rclpy.init()
    node = rclpy.create_node("executables_watch", namespace=namespace)
    try:
        node.create_subscription(String, "pipeline_stats", on_report, 50)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not all(checked.get(name, 0) > 0 for name in consumers):
            ended = {name: child.communicate()[1] for name, child in children.items() if child.poll() is not None}
            assert not ended, ended
            rclpy.spin_once(node, timeout_sec=0.1)
        idle = [name for name in consumers if checked.get(name, 0) <= 0]
    finally:
        node.destroy_node()
        rclpy.shutdown()
        errors = stop_in_turn(children)  # the sources first, as the pipeline runner stops them
    assert not idle, (f"{idle} checked no frame in 90 s; checked {json.dumps(checked)}; their last reports "
                      f"{json.dumps({name: reports.get(name) for name in idle})}; their stderr "
                      f"{json.dumps({name: errors[name][-3000:] for name in idle})}")
    for name, child in children.items():
        assert child.returncode == 0 and "Traceback" not in errors[name], (name, child.returncode, errors[name])

"""A newcomer's mistakes on the command line, on the installed executables: malformed ``--ros-args`` are one line
and exit code 2 (not rclpy's 26-line traceback and exit 1), a stop while an executable starts is a clean exit 0,
even where SIGINT was ignored at its start (a shell script's ``cmd &``), and a misspelled parameter is a warning
naming the closest one (it was silently ignored)."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from peers import own_lines
from rclpy.parameter import Parameter

#: Malformed ROS arguments and what the one line they are refused with says.
MALFORMED = [
    (["-p", "width"], "parameter override rule: '-p width'; -p takes NAME:=VALUE"),
    (["--params-file", "/missing.yaml"], "params file: '--params-file /missing.yaml'; Error opening YAML file"),
    (["-r", "image:=bad topic"], "remap rule: '-r image:=bad topic'"),
    (["-r", "__ns:=nolead"], "remap rule: '-r __ns:=nolead'; -r takes FROM:=TO"),
    (["--log-level", "loud"], "log level: '--log-level loud'"),
]
#: Executables (and what comes before their --ros-args) that take ROS arguments: each node kind, the tools.
TAKERS = [
    ["gpu_to_image"], ["image_to_gpu"], ["gpu_to_pointcloud2"], ["pointcloud2_to_gpu"], ["preview"],
    ["run_component", "ros2_cuda_ipc_examples::SyntheticCamera"], ["container"], ["viewer", "--headless"],
    ["cuda_ipc_top", "--once"],
]


def installed(executable: str) -> str:
    path = shutil.which(executable)
    assert path is not None, f"{executable} is not on PATH"
    return path


def run_all(commands: list[list[str]]) -> list[subprocess.CompletedProcess]:
    """Run ``commands`` side by side (each starts in about a second), each to its end."""
    children = [subprocess.Popen([installed(command[0]), *command[1:]], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for command in commands]
    done = []
    for command, child in zip(commands, children, strict=True):
        try:
            out, err = child.communicate(timeout=90)
        finally:
            if child.poll() is None:
                child.kill()
        done.append(subprocess.CompletedProcess(command, child.returncode, out, err))
    return done


def assert_one_line_refusal(done: subprocess.CompletedProcess, said: str) -> None:
    lines = own_lines(done.stderr)
    assert done.returncode == 2, (done.args, done.returncode, done.stderr)
    assert len(lines) == 1 and said in lines[0] and "--ros-args" in lines[0], (done.args, done.stderr)


def test_malformed_ros_arguments_are_one_line_and_exit_2():
    """Before: 26-29 lines of rclpy traceback from rclpy.init (rcl's own "Failed to parse" line above it), exit 1."""
    done = run_all([["synthetic_camera", "--ros-args", *args] for args, _ in MALFORMED])
    for (_, said), result in zip(MALFORMED, done, strict=True):
        assert_one_line_refusal(result, said)
        assert result.stderr.startswith("SyntheticCamera: --ros-args: ")


def test_every_executable_taking_ros_arguments_refuses_them_the_same_way():
    done = run_all([[*command, "--ros-args", "-r", "__ns:=nolead"] for command in TAKERS])
    for result in done:
        assert_one_line_refusal(result, "remap rule: '-r __ns:=nolead'")


def test_an_argument_rcl_does_not_know_after_ros_args_is_named():
    done, = run_all([["synthetic_camera", "--ros-args", "-r", "image:=/cam", "extra"]])
    assert_one_line_refusal(done, "not ROS arguments: ['extra']")


def test_an_invalid_topic_name_in_the_viewer_is_one_line():
    """Before: a traceback from rclpy's resolve_topic_name, a few seconds in, and exit code 0."""
    done = run_all([["viewer", "--headless", "bad topic"], ["viewer", "--headless", "--cloud", "1points"]])
    lines = [own_lines(result.stderr) for result in done]
    assert done[0].returncode == 2 and len(lines[0]) == 1
    assert lines[0][0].startswith("viewer: argument IMAGE_TOPIC: 'bad topic' is not a topic name: ")
    assert done[1].returncode == 2 and lines[1] == [
        "viewer: argument --cloud: '1points' is not a topic name: topic name token must not start with a number"]


def _signals(pid: int, field: str) -> int:
    """The mask of signals /proc says the process has in ``field`` (SigIgn, SigCgt); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1], 16) for line in status if line.startswith(f"{field}:"))
    except (OSError, StopIteration):
        return 0


def _caught(pid: int, number: int) -> bool:
    return bool(_signals(pid, "SigCgt") & (1 << (number - 1)))


# SIGINT ignored at the start: an executable catches it once its start-up hold is in (its first import of core),
# a second or so before its node runs.  SIGTERM: Python never catches it, so the same mask shows the hold.
@pytest.mark.parametrize(("executable", "stop", "ignored"), [
    ("synthetic_camera", signal.SIGINT, True),
    ("synthetic_camera", signal.SIGTERM, False),
    ("gpu_to_image", signal.SIGINT, True),
    ("viewer", signal.SIGTERM, False),
    ("cuda_ipc_top", signal.SIGINT, True),
    ("container", signal.SIGTERM, False),
])
def test_a_stop_while_an_executable_starts_is_a_clean_exit_0(executable, stop, ignored):
    """Before: a KeyboardInterrupt traceback from the middle of an import (exit -2); a SIGINT that came while it was
    still ignored was lost, and the node ran on."""
    command = [installed(executable), *(["--headless"] if executable == "viewer" else [])]
    restore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=restore)
    try:
        deadline = time.monotonic() + 60
        while not _caught(child.pid, stop) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert child.poll() is None, child.communicate()
        os.kill(child.pid, stop)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, (child.returncode, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_importing_the_library_leaves_a_programs_own_handlers_alone():
    """The start-up hold is for this workspace's executables: a program that imports the package keeps Python's
    KeyboardInterrupt and its SIGTERM.  A fresh interpreter started with both signals at their defaults (a test
    run started in the background, as CI may be, inherits SIGINT ignored, and Python then keeps it so)."""
    def defaults() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    probe = ("import signal, ros2_cuda_ipc_core\n"
             "from ros2_cuda_ipc_core.node.startup import stops_while_starting\n"
             "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,"
             " signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, stops_while_starting())")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         preexec_fn=defaults)
    assert run.returncode == 0 and run.stdout.split() == ["True", "True", "[]"], (run.stdout, run.stderr)


def test_the_stop_hold_is_the_packages_first_import():
    """The hold covers the package's whole import only if nothing heavy loads before it: numpy (imported by core's
    memory layer) took 76 ms before the hold once an import sorter moved it down the package's ``__init__``."""
    probe = ("import sys\nbefore = set(sys.modules)\nimport ros2_cuda_ipc_core\n"
             "new = [name for name in sys.modules if name not in before]\n"
             "print(new.index('ros2_cuda_ipc_core.node.startup'), new.index('numpy'), new.index('rclpy'))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    startup, numpy, rclpy = map(int, run.stdout.split())
    assert startup < 10 and startup < numpy and startup < rclpy, run.stdout


def _until_line(child: subprocess.Popen, said: str, timeout: float = 60.0) -> list[str]:
    """The stderr lines of ``child`` up to the first one holding ``said`` (all of them if it ends or time is up)."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert child.stderr is not None
    while time.monotonic() < deadline:
        line = child.stderr.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if said in line:
            break
    return lines


@pytest.mark.parametrize("command", [
    ["synthetic_camera", "--ros-args", "-p", "memory:=host", "-p", "widht:=640"],
    ["container", "--load", "ros2_cuda_ipc_examples::SyntheticCamera", "--param", "memory:=host", "--param",
     "widht:=640"],
])
def test_a_misspelled_parameter_is_one_warning_naming_the_closest(command):
    """Before: ``-p widht:=640`` was silently ignored, and the camera drew 1920 wide."""
    child = subprocess.Popen([installed(command[0]), *command[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    try:
        lines = _until_line(child, "is ignored")
    finally:
        os.kill(child.pid, signal.SIGINT)
        _, rest = child.communicate(timeout=60)
    warned = [line for line in lines + rest.splitlines() if "is ignored" in line]
    assert warned and len(warned) == 1, (lines, rest)
    assert "parameter 'widht' is ignored: did you mean 'width'? (--help lists them)" in warned[0]
    assert child.returncode == 0, rest


def test_unknown_parameters_are_those_no_declared_one_took(node):
    from ros2_cuda_ipc_core.node.parameters import unknown_parameters
    from ros2_cuda_ipc_examples.nodes.camera import SyntheticCamera

    camera = SyntheticCamera(parameter_overrides=[Parameter("memory", value="host"), Parameter("widht", value=640),
                                                  Parameter("brightness", value=5.0), Parameter("zzz", value=1),
                                                  Parameter("use_sim_time", value=False)])
    try:
        assert unknown_parameters(camera) == {"brightness": None, "widht": "width", "zzz": None}
    finally:
        camera.destroy_node()


def test_help_lists_what_the_node_takes():
    """Before: the camera's --help listed mono8, which it refuses; the bridges' omitted max_frame_bytes."""
    done = run_all([["synthetic_camera", "--help"], ["gpu_to_image", "--help"], ["image_to_gpu", "--help"],
                    ["gpu_to_pointcloud2", "--help"], ["pointcloud2_to_gpu", "--help"]])
    assert all(result.returncode == 0 for result in done), done
    encoding = next(line for line in done[0].stdout.splitlines() if line.split()[:1] == ["encoding"])
    assert "mono8" not in encoding and "rgb8, bgr8, rgba8, bgra8" in encoding
    for bridge in done[1:]:
        assert any(line.split()[:1] == ["max_frame_bytes"] and line.endswith("(default: 268435456)")
                   for line in bridge.stdout.splitlines()), bridge.stdout


def test_a_frame_too_large_to_draw_is_refused_by_its_parameters():
    """Before: ``-p width:=100000 -p height:=100000`` was a numpy MemoryError traceback."""
    done, = run_all([["synthetic_camera", "--ros-args", "-p", "memory:=host", "-p", "width:=100000", "-p",
                      "height:=100000"]])
    assert done.returncode == 2 and own_lines(done.stderr) == [
        "SyntheticCamera: 100000x100000 rgb8 is 30000000000 bytes a frame, more than the 256 MiB the scene draws "
        "(the bridges' max_frame_bytes)"], done.stderr


def test_a_misspelt_or_mistyped_input_topic_is_said_with_a_hint():
    """Before: ``gpu_to_image -r gpu_image:=/cam/imag`` beside a camera on /cam/image was silent, and so was
    ``inference_like`` given the camera's GpuImage topic (DDS never matches a reader with a writer of another type)."""
    camera = ["synthetic_camera", "--ros-args", "-r", "image:=/hint/cam/image", "-p", "memory:=host", "-p", "width:=96",
              "-p", "height:=64", "-p", "fps:=5.0"]
    listeners = {"bridge": ["gpu_to_image", "--ros-args", "-r", "__node:=hint_bridge", "-r", "gpu_image:=/hint/cam/imag"],
                 "inference": ["inference_like", "--ros-args", "-r", "__node:=hint_inference", "-r",
                               "preprocessed:=/hint/cam/image"]}
    said = {"bridge": "/hint/cam/imag: no publisher (after 3 s); ros2_cuda_ipc_msgs/msg/GpuImage is published on "
                      "/hint/cam/image; did you mean /hint/cam/image?",
            "inference": "/hint/cam/image: published as ros2_cuda_ipc_msgs/msg/GpuImage, not "
                         "ros2_cuda_ipc_msgs/msg/GpuTensor (after 3 s): none of its messages can arrive here"}
    children = {name: subprocess.Popen([installed(command[0]), *command[1:]], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)
                for name, command in [("camera", camera), *listeners.items()]}
    lines: dict[str, list[str]] = {}
    try:
        for name in listeners:
            lines[name] = _until_line(children[name], said[name])
    finally:
        for child in children.values():  # one at a time (Fast DDS 3.2's deadlock when all leave at once)
            child.send_signal(signal.SIGINT)
            child.communicate(timeout=60)
    for name in listeners:
        assert any(said[name] in line for line in lines[name]), (name, lines[name])
        assert children[name].returncode == 0

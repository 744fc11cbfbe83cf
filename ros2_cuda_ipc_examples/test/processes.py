"""Test support: start example processes, wait until their nodes are in the ROS graph, stop them with SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable

import rclpy

from ros2_cuda_ipc_examples.pipelines.stacks import native_stacks
from ros2_cuda_ipc_tools import PARENT_PID_VARIABLE, STACKS_SIGNAL


def start(module: str, *args: str) -> subprocess.Popen:
    """``python -m module args...``, its output captured as text; started as the pipeline runner starts its
    nodes, so it ends with this process and prints its threads' stacks when asked (see ``interrupt``)."""
    return subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, PARENT_PID_VARIABLE: str(os.getpid())})


def wait_for_nodes(node: rclpy.node.Node, names: Iterable[str], processes: Iterable[subprocess.Popen] = (),
                   timeout: float = 30.0) -> None:
    """Until every fully qualified name in ``names`` is in the graph; fail at once if a process ends first."""
    wanted = set(names)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                _, err = process.communicate()
                raise AssertionError(f"{process.args} ended with {process.returncode} before its node was up:\n{err}")
        present = {ns.rstrip("/") + "/" + name for name, ns in node.get_node_names_and_namespaces()}
        if wanted <= present:
            return
        rclpy.spin_once(node, timeout_sec=0.1)
    raise AssertionError(f"nodes never appeared: {sorted(wanted - present)}")


def interrupt(process: subprocess.Popen, timeout: float = 20.0) -> tuple[int, str, str]:
    """SIGINT, then (return code, stdout, stderr); a process still running ``timeout`` s later is asked for its
    threads' stacks (they end its stderr) and killed."""
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(STACKS_SIGNAL)
        time.sleep(1.0)  # faulthandler writes them from the signal handler
        below_python = native_stacks(process.pid)
        process.kill()
        out, err = process.communicate()
        err += "\n" + below_python
    return process.returncode, out, err

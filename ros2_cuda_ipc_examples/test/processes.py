"""Test support: start example processes, wait until their nodes are in the ROS graph, stop them with SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterable

import rclpy


def start(module: str, *args: str) -> subprocess.Popen:
    """``python -m module args...``, its output captured as text."""
    return subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


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
    """SIGINT, then (return code, stdout, stderr)."""
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return process.returncode, out, err

"""fanout.launch.py describes the same nodes separate and composed (where launch_ros exists: ROS installs)."""

import importlib.util
from pathlib import Path

import pytest

LAUNCH_FILE = Path(__file__).resolve().parents[1] / "launch" / "fanout.launch.py"


def test_launch_file_describes_both_ways():
    pytest.importorskip("launch_ros", reason="launch_ros comes with a ROS install, not with the PyPI wheels")
    from launch_ros.actions import ComposableNodeContainer, Node

    spec = importlib.util.spec_from_file_location("fanout_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    entities = module.generate_launch_description().entities
    assert len([e for e in entities if isinstance(e, Node)]) == 5
    containers = [e for e in entities if isinstance(e, ComposableNodeContainer)]
    assert len(containers) == 1


def test_launch_file_is_installed_with_the_package():
    setup = (LAUNCH_FILE.parents[1] / "setup.py").read_text()
    assert '"launch/fanout.launch.py"' in setup

"""measure_cost's command line: help, and bad arguments refused with exit code 2 before any process starts."""

import subprocess
import sys

import pytest

TOOL = [sys.executable, "-m", "ros2_cuda_ipc_tensor.measure_cost"]


def test_help_says_what_it_measures():
    done = subprocess.run([*TOOL, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--rate" in done.stdout and "__dlpack__" in done.stdout


@pytest.mark.parametrize("args", [["--bogus"], ["--rate", "0"], ["--rate", "nan"], ["--rate", "inf"],
                                  ["--count", "4"]])
def test_bad_arguments_are_refused(args):
    done = subprocess.run([*TOOL, *args, "--count", "5"] if "--count" not in args else [*TOOL, *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (args, done.stdout, done.stderr)

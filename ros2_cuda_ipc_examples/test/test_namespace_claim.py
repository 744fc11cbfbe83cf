"""One pipeline run per namespace on a machine: a second claim is refused at once and names the holder's pid."""

import os
import subprocess
import sys

import pytest

from ros2_cuda_ipc_examples.pipelines.namespace_claim import NamespaceTaken, claim_namespace


def test_a_second_claim_is_refused_with_the_holders_pid_and_the_name_is_free_again_after():
    claim = claim_namespace("/claimed_twice")
    try:
        with pytest.raises(NamespaceTaken) as taken:
            claim_namespace("/claimed_twice")
        assert taken.value.pid == os.getpid() and "/claimed_twice on this machine" in str(taken.value)
        claim_namespace("/claimed_elsewhere").close()  # another namespace is another claim
    finally:
        claim.close()
    claim_namespace("/claimed_twice").close()


def test_a_claim_is_per_ros_domain_and_ends_with_its_process(monkeypatch):
    held = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                             "from ros2_cuda_ipc_examples.pipelines.namespace_claim import claim_namespace\n"
                             "claim = claim_namespace('/held'); print('held', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "ROS_DOMAIN_ID": "7"})
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "held"
        monkeypatch.setenv("ROS_DOMAIN_ID", "7")
        with pytest.raises(NamespaceTaken) as taken:
            claim_namespace("/held")
        assert taken.value.pid == held.pid
        monkeypatch.setenv("ROS_DOMAIN_ID", "8")
        claim_namespace("/held").close()  # another domain: no conflict
    finally:
        held.kill()
        held.wait()
    monkeypatch.setenv("ROS_DOMAIN_ID", "7")
    claim_namespace("/held").close()  # killed: the kernel gave the name back


def test_a_long_namespace_is_claimed_by_its_digest():
    long = "/" + "n" * 200
    claim = claim_namespace(long)
    try:
        with pytest.raises(NamespaceTaken):
            claim_namespace(long)
        claim_namespace(long + "x").close()
    finally:
        claim.close()

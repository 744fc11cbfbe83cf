"""One pipeline run per namespace on a machine: a second claim is refused at once and names the holder's pid; the
domain is its number, however spelled; another user's socket on the name is no pipeline of ours."""

import os
import subprocess
import sys

import pytest

from ros2_cuda_ipc_examples.pipelines.namespace_claim import InvalidDomainId, NamespaceTaken, claim_namespace, domain_id


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


@pytest.mark.parametrize("spelling", [" 96", "+96", "96 ", "0x60"])
def test_every_spelling_of_a_domain_number_is_one_claim(monkeypatch, spelling):
    monkeypatch.setenv("ROS_DOMAIN_ID", "96")
    claim = claim_namespace("/spelled")
    try:
        monkeypatch.setenv("ROS_DOMAIN_ID", spelling)  # rcl reads each as domain 96: before, each was its own claim
        with pytest.raises(NamespaceTaken):
            claim_namespace("/spelled")
    finally:
        claim.close()


@pytest.mark.parametrize("value", ["abc", "96abc", "-1", "233", "٩٦", "1" * 5000])
def test_a_domain_id_rcl_would_not_take_is_one_clear_error(monkeypatch, value):
    monkeypatch.setenv("ROS_DOMAIN_ID", value)
    with pytest.raises(InvalidDomainId, match=r"^ROS_DOMAIN_ID=.* (is not a domain number|above the largest)"):
        claim_namespace("/any")
    assert domain_id("") == 0 and domain_id(" 7 ") == 7


_SYSTEM_PYTHON = "/usr/bin/python3"  # one another user may run (the workspace's lies under /root)


def _squat_as(uid: int, name: str) -> subprocess.Popen:
    """A process of user ``uid`` that binds and listens on the abstract name ``name`` (as anyone can)."""
    script = ("import socket, sys, time\ns = socket.socket(socket.AF_UNIX)\ns.bind('\\0' + sys.argv[1])\ns.listen(1)\n"
              "print('bound', flush=True)\ntime.sleep(120)")
    squatter = subprocess.Popen([_SYSTEM_PYTHON, "-c", script, name], stdout=subprocess.PIPE, text=True, user=uid,
                                cwd="/")
    assert squatter.stdout is not None and squatter.stdout.readline().strip() == "bound"
    return squatter


@pytest.mark.skipif(os.getuid() != 0 or not os.path.exists(_SYSTEM_PYTHON),
                    reason="starting a process of another user takes root and a Python it may run")
def test_another_users_socket_on_the_name_is_said_and_the_run_claims_its_uid_qualified_name(monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", "96")
    squatter = _squat_as(1002, "ros2_cuda_ipc/pipeline/96//squatted")  # what the red team bound, for /lidar
    said: list[str] = []
    try:
        claim = claim_namespace("/squatted", warn=said.append)  # before: NamespaceTaken naming uid 1002's process
        assert claim is not None and len(said) == 1, said
        assert f"held by uid 1002 (pid {squatter.pid}), not by a pipeline of this user" in said[0]
        try:
            with pytest.raises(NamespaceTaken) as taken:  # this user's second run is still refused
                claim_namespace("/squatted", warn=said.append)
            assert taken.value.pid == os.getpid()
        finally:
            claim.close()
    finally:
        squatter.kill()
        squatter.wait()

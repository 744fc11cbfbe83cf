"""A publisher in its own pid namespace (a container) is held to the pid and namespace its socket's name states.

Real processes in namespaces this test makes (``unshare``, as root; gone with the processes): the victim and the
squatter are each pid 1 of a namespace of their own, so only the namespace tells them apart."""

import json

import numpy as np
import pytest
from core_peer import core_from_json
from isolation import other_pid_namespace, pid_namespaces_unavailable

from ros2_cuda_ipc_core import PoolIdentityError, Reader
from ros2_cuda_ipc_core.pool.socket_names import own_pid_namespace, socket_owner

pytestmark = pytest.mark.skipif(pid_namespaces_unavailable() is not None, reason=str(pid_namespaces_unavailable()))

CORE_PEER = "ros2_cuda_ipc_core/test/core_peer.py"
HOSTILE = "ros2_cuda_ipc_core/test/hostile_peer.py"


def start(place, script, *args):
    import subprocess
    import sys

    return subprocess.Popen(place.command(sys.executable, script, *args), env=place.env, stdout=subprocess.PIPE,
                            text=True)


def test_a_squatter_in_another_pid_namespace_cannot_pass_for_a_publisher_in_a_container(short_tmp_path):
    with other_pid_namespace(private_shm=False, private_tmp=False) as (_here, container):
        victim = start(container, CORE_PEER, "publish-and-wait")
        squatter = None
        try:
            genuine = [core_from_json(victim.stdout.readline()) for _ in range(2)]
            owner = socket_owner(genuine[0].socket_path)
            assert owner is not None and owner.pid == 1 and owner.pid_namespace != own_pid_namespace(), owner
            squatter = start(container, HOSTILE, "squat", bytes(genuine[0].pool_id).hex(), "1", str(short_tmp_path),
                             str(owner.pid_namespace))
            forged = {name: core_from_json(text) for name, text in json.loads(squatter.stdout.readline()).items()}
            assert socket_owner(forged["named_as_victim"].socket_path) == owner._replace(
                pool_hex=owner.pool_hex[:16]), "the squatter's socket claims the victim's pid and namespace"
            reader = Reader()
            for _ in range(3):
                for core, value in zip(genuine, (11, 22), strict=True):
                    with reader.read(core) as handle:  # zero-copy, across the namespaces
                        assert (handle.view((1 << 20,), np.uint8) == value).all()
                with pytest.raises(PoolIdentityError, match=r"of pid namespace .* not by pid 1 of namespace"):
                    Reader().read(forged["named_as_victim"])  # pid 1 both, another namespace: refused
            with reader.read(forged["own"]) as handle:  # its own pool, named as its own: its own frames
                assert bytes(handle.view((8,), np.uint8)) == b"HACKED!!"
            for core, value in zip(genuine, (11, 22), strict=True):  # and the victim's are still the victim's
                with reader.read(core) as handle:
                    assert (handle.view((1 << 20,), np.uint8) == value).all()
            stats = reader.stats()
            assert stats["imports"] == 2 and stats["pool_id_conflicts"] == 1, stats
        finally:
            for peer in (victim, squatter):
                if peer is not None:
                    peer.kill()
                    peer.wait()

"""Ouster clouds reach a subscriber on another "host" (a network namespace over a veth pair) through the
PointCloud2 twin, every byte of every field checked; a subscriber here reads them zero-copy meanwhile."""

import pytest
from fallback_runs import far_and_near
from isolation import isolation_unavailable, other_host

pytestmark = pytest.mark.skipif(isolation_unavailable() is not None, reason=str(isolation_unavailable()))


def test_a_subscriber_in_another_network_namespace_gets_every_cloud_through_the_twin():
    with other_host() as (here, there):
        run = far_and_near("cloud", "fallback_clouds", here, there)
    far, near = run["far"], run["near"]
    assert far["errors"] == [] and far["verified"] == 100, far
    assert far["stats"]["frames"]["zero_copy"] == 0 and far["memory"] == ["host"]
    assert run["far_log"].count("cannot be read zero-copy") == 1, run["far_log"]
    assert near["errors"] == [] and near["verified"] == 100
    assert near["stats"]["frames"]["fallback"] == 0
    published = "published /fallback_clouds/cpu"
    assert run["before"]["twins"][published] == 0 and run["before"]["twins"]["downloads"] == 0
    assert run["main"]["twins"][published] >= 100 and run["main"]["twins"]["busy_drops"] == 0
    assert run["end"]["twins"][published] == run["main"]["twins"][published]

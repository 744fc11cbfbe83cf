"""Images reach a subscriber on another "host" (a network namespace over a veth pair) and as another user,
through the CPU twin, with no change to its code; a strict one refuses and says why.  Real processes, real DDS."""

import pytest
from fallback_runs import far_and_near, refused
from isolation import isolation_unavailable, other_host, other_user

pytestmark = pytest.mark.skipif(isolation_unavailable() is not None, reason=str(isolation_unavailable()))
TWIN = "/fallback_images/cpu"


def test_a_subscriber_in_another_network_namespace_gets_every_frame_through_the_twin():
    with other_host() as (here, there):
        run = far_and_near("image", "fallback_images", here, there)
    far, near = run["far"], run["near"]
    assert far["errors"] == [] and far["verified"] == 100, far
    assert far["stats"]["frames"]["zero_copy"] == 0 and far["stats"]["frames"]["fallback"] >= 100
    assert far["memory"] == ["host"]
    assert list(far["stats"]["by_reason"]) and "nothing listens" in next(iter(far["stats"]["by_reason"]))
    assert far["stats"]["dropped"].get("duplicate", 0) == 0
    assert run["far_log"].count("cannot be read zero-copy") == 1, run["far_log"]  # one line, naming the reason
    assert near["errors"] == [] and near["verified"] == 100
    assert near["stats"]["frames"]["fallback"] == 0 and not near["stats"]["twin_subscribed"]
    published = f"published {TWIN}"
    assert run["before"]["twins"][published] == 0 and run["before"]["twins"]["leased"] == 0  # nobody on the twin
    twinned = run["main"]["twins"][published]
    assert twinned >= 100 and run["main"]["twins"]["busy_drops"] == 0
    assert run["end"]["twins"][published] == twinned  # the far subscriber left: no more twin frames
    assert run["end"]["twins"]["idle"] >= 5


def test_another_user_falls_back_and_a_strict_one_gets_nothing_and_says_why():
    with other_user() as (here, theirs, _uid):
        auto = refused("image", "fallback_user_images", here, theirs, "auto")
        strict = refused("image", "fallback_user_images_strict", here, theirs, "never")
    assert auto["sub"]["errors"] == [] and auto["sub"]["verified"] == 20, auto
    assert auto["sub"]["stats"]["frames"]["zero_copy"] == 0
    assert auto["log"].count("cannot be read zero-copy") == 1, auto["log"]
    sub = strict["sub"]
    assert sub["verified"] == 0 and sub["stats"]["frames"]["fallback"] == sub["stats"]["frames"]["zero_copy"] == 0
    assert sub["stats"]["frames"]["refused"] >= 20 and not sub["stats"]["twin_subscribed"]
    assert strict["log"].count("refusing the publisher") == 1, strict["log"]
    assert "fallback='never'" in strict["log"] and "uid" in strict["log"]  # the reason: the pool's user
    assert strict["publisher"]["twins"]["leased"] == 0  # nobody asked for the twin

"""A route is decided per pool instance, by a descriptor that reached its pool (DESIGN §13): descriptors that name
a live publisher's pool id with the socket of a process that is not running, sent before its first frame, decide
nothing for the genuine publisher, whichever ``fallback`` the subscription has.  Real processes, real DDS."""

import os

import pytest
from fallback_runs import peer_group
from isolation import Place

HERE = Place((), dict(os.environ))


@pytest.mark.parametrize("fallback", ["auto", "never"])
def test_descriptors_naming_a_live_pool_from_a_dead_pid_do_not_decide_its_route(fallback):
    with peer_group() as start:
        publisher = start(HERE, "publisher", "image", f"poisoned_{fallback}")
        sub = start(HERE, "subscriber", "image", f"poisoned_{fallback}", "victim", fallback, "20")
        publisher.ask("match 1")
        publisher.ask("forge_dead 5")  # the first descriptors of this pool id the subscriber ever sees
        publisher.ask("burst 20 main victim")
        publisher.ask("quit")
        seen, log = sub.finish()
    assert seen["errors"] == [] and seen["seqs"] == list(range(20)), seen
    frames = seen["stats"]["frames"]
    assert frames["zero_copy"] == 20 and frames["fallback"] == 0, frames  # every genuine frame, in place
    routes = seen["stats"]["routes"]
    assert routes["zero_copy"] == 1, routes  # the genuine instance, decided by its own descriptors
    if fallback == "never":  # the forged instance is its own, and refused: counted, said once
        assert routes == {"zero_copy": 1, "refused": 1} and frames["refused"] == 5, seen["stats"]
        assert log.count("refusing the publisher") == 1 and "is not running" in log, log
    else:  # to its twin, which never brings its frames; the genuine publisher's are not touched
        assert routes == {"zero_copy": 1, "fallback": 1}, seen["stats"]

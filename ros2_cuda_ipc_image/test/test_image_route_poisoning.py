"""A route is decided per pool instance, by a descriptor that reached its pool (DESIGN §13): descriptors that name
a live publisher's pool id with the socket of a process that is not running, sent before its first frame, decide
nothing for the genuine publisher, whichever ``fallback`` the subscription has; so too when the publisher (and the
forger) live in a pid namespace of their own, a container's.  Real processes, real DDS."""

import contextlib
import os

import pytest
from fallback_runs import peer_group
from isolation import Place, other_pid_namespace, pid_namespaces_unavailable

HERE = Place((), dict(os.environ))
IN_CONTAINER = pytest.param("container", marks=pytest.mark.skipif(pid_namespaces_unavailable() is not None,
                                                                  reason=str(pid_namespaces_unavailable())))


@pytest.mark.parametrize("where", ["here", IN_CONTAINER])
@pytest.mark.parametrize("fallback", ["auto", "never"])
def test_descriptors_naming_a_live_pool_from_a_dead_pid_do_not_decide_its_route(fallback, where):
    topic = f"poisoned_{fallback}_{where}"
    places = other_pid_namespace(private_shm=False) if where == "container" else contextlib.nullcontext((HERE, HERE))
    with places as (here, there), peer_group() as start:
        publisher = start(there, "publisher", "image", topic)
        sub = start(here, "subscriber", "image", topic, "victim", fallback, "20")
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
        # a dead pid of this namespace is seen at once; one of another namespace when nothing answers its socket
        assert log.count("refusing the publisher") == 1, log
        assert ("is not running" if where == "here" else "nothing listens there") in log, log
    else:  # to its twin, which never brings its frames; the genuine publisher's are not touched
        assert routes == {"zero_copy": 1, "fallback": 1}, seen["stats"]

"""Images from a publisher in a "container" (its own pid, mount and /tmp namespaces, with or without its own
/dev/shm; the network shared, as ``docker run --network host`` gives) reach a subscriber outside it zero-copy, every
frame checked byte for byte; where the kernel will not say who serves the pool, the CPU twin, with one line."""

import pytest
from fallback_runs import peer_group, published_there
from gpu_marks import MEMORIES
from isolation import Place, inside, other_pid_namespace, pid_namespaces_unavailable, stale_proc_pid_namespace

pytestmark = pytest.mark.skipif(pid_namespaces_unavailable() is not None, reason=str(pid_namespaces_unavailable()))
FRAMES = 60


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("private_shm", [False, True], ids=["shared-dev-shm", "private-dev-shm"])
def test_a_publisher_in_its_own_pid_namespace_is_read_zero_copy(private_shm, memory):
    """CUDA pools too: their memory travels as an fd and their readiness as timeline values in the pool's memfd,
    so neither needs the /dev/shm an interprocess event handle would."""
    with other_pid_namespace(private_shm) as (here, container):
        container = Place(container.prefix, {**container.env, "R2CI_MEMORY": memory})
        run = published_there("image", f"container_images_{int(private_shm)}_{memory}", container, here, FRAMES)
    sub = run["sub"]
    assert sub["errors"] == [] and sub["verified"] == FRAMES, sub
    frames = sub["stats"]["frames"]
    assert frames["zero_copy"] >= FRAMES and frames["fallback"] == 0, sub["stats"]
    assert sub["stats"]["dropped"].get("invalid", 0) == 0, sub["stats"]
    assert sub["memory"] == [memory]
    assert "cannot be read zero-copy" not in run["log"], run["log"]


def test_a_reader_that_cannot_verify_the_publisher_reads_its_twin_and_says_why_once():
    """The reader's /proc is another pid namespace's: it cannot tell which process serves the pool."""
    with other_pid_namespace(private_shm=False) as (_here, container), peer_group() as start:
        sub = start(stale_proc_pid_namespace(), "subscriber", "image", "container_unverified", "sub", "auto", "20")
        publisher = start(inside(sub.proc, container), "publisher", "image", "container_unverified")
        publisher.ask("match 1")
        publisher.ask("await_twin sub")
        publisher.ask("burst 20 main sub")
        result, log = sub.finish()
    assert result["errors"] == [] and result["verified"] == 20, result
    assert result["stats"]["frames"]["zero_copy"] == 0 and result["stats"]["frames"]["fallback"] >= 20, result
    assert log.count("cannot be read zero-copy") == 1, log
    assert "/proc will not say" in log, log

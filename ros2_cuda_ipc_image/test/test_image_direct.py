"""Direct delivery (``delivery="direct"``, DESIGN §14), tried from real processes over real DDS, host memory.

Every frame reaches each direct subscriber once and in order while DDS delivers it too; a late joiner, an
executor subscriber and one in another network namespace each get every frame; a subscriber that stops
reading or dies never makes a publish wait; a publisher killed mid-run leaves its direct subscriber
running and able to stop cleanly.  Frames are 1280x720 bgr8 images checked byte for byte (fallback_peer).
"""

import os
import signal
import time

import pytest
from fallback_runs import peer_group
from isolation import Place, isolation_unavailable, other_host

HERE = Place((), dict(os.environ))


def ordered_and_complete(sub: dict, frames) -> None:
    assert sub["errors"] == [], sub["errors"]
    assert sub["seqs"] == list(frames), sub["seqs"]


def subscriber(start, name: str, topic: str, count: int, delivery: str = "direct", place: Place = HERE):
    return start(place, "subscriber", "image", topic, name, "auto", str(count), delivery)


def test_every_frame_reaches_each_direct_subscriber_once_and_in_order_while_dds_delivers_too():
    with peer_group() as start:
        publisher = start(HERE, "publisher", "image", "direct_images")
        subs = [subscriber(start, name, "direct_images", 60) for name in ("d1", "d2")]
        subs.append(subscriber(start, "ex", "direct_images", 60, "executor"))
        publisher.ask("match 3")
        publisher.ask("burst 60 main d1,d2,ex")
        stats = publisher.ask("stats")["pool"]
        publisher.ask("quit")
        results = [peer.finish()[0] for peer in subs]
    for sub in results:
        ordered_and_complete(sub, range(60))
        assert sub["stats"]["frames"]["zero_copy"] == 60
    for sub in results[:2]:
        arrived = sub["stats"]["arrived"]
        assert sub["threads"] == ["other"], sub["threads"]  # the subscription's delivery thread, never the executor's
        assert sub["stats"]["direct"]["direct_channels_opened"] == 1
        assert arrived["direct"] >= 50, arrived  # the first frame opens the channel; the rest come on it ...
        assert arrived["dds"] >= 55, arrived  # ... while DDS brings them all as well
        assert sub["stats"]["dropped"]["duplicate"] >= 50  # and the second copy of each is dropped
    assert results[2]["threads"] == ["executor"] and "direct" not in results[2]["stats"]
    assert results[2]["stats"]["arrived"].get("direct", 0) == 0
    assert stats["direct_subscribed"] == 2 and stats["direct_sent"] >= 100 and stats["direct_drops"] == 0


def test_a_late_joiner_gets_every_frame_from_its_first_on():
    with peer_group() as start:
        publisher = start(HERE, "publisher", "image", "direct_late")
        early = subscriber(start, "early", "direct_late", 40)
        publisher.ask("match 1")
        publisher.ask("burst 20 main early")
        late = subscriber(start, "late", "direct_late", 20)
        publisher.ask("match 2")
        warmups = publisher.ask("await_ack early,late")["warmups"]  # warm-up frames until the late one is in step
        publisher.ask("burst 20 main early,late")
        publisher.ask("quit")
        early_seen, late_seen = early.finish()[0], late.finish()[0]
    later = range(20 + warmups, 40 + warmups)  # frames are numbered across bursts, warm-ups included
    ordered_and_complete(early_seen, [*range(20), *later])
    ordered_and_complete(late_seen, later)
    assert late_seen["stats"]["direct"]["direct_channels_opened"] == 1


@pytest.mark.skipif(isolation_unavailable() is not None, reason=str(isolation_unavailable()))
def test_a_direct_subscriber_in_another_network_namespace_gets_every_frame_through_the_twin():
    with other_host() as (here, there), peer_group() as start:
        publisher = start(here, "publisher", "image", "direct_far")
        far = subscriber(start, "far", "direct_far", 20, place=there)
        publisher.ask("match 1")
        warmups = publisher.ask("await_twin far")["warmups"]
        publisher.ask("burst 20 main far")
        publisher.ask("quit")
        seen, log = far.finish()
    ordered_and_complete(seen, range(warmups, warmups + 20))
    assert seen["stats"]["frames"]["fallback"] >= 20 and seen["stats"]["frames"]["zero_copy"] == 0
    assert seen["stats"]["direct"]["direct_channels_opened"] == 0  # no pool reached, no channel tried
    assert seen["threads"] == ["other"] and log.count("cannot be read zero-copy") == 1, log


def test_a_stopped_or_killed_direct_subscriber_never_makes_a_publish_wait():
    with peer_group() as start:
        publisher = start(HERE, "publisher", "image", "direct_stuck")
        sub = subscriber(start, "stuck", "direct_stuck", 1000000)
        publisher.ask("match 1")
        publisher.ask("burst 2 main stuck")  # the first frame opened its channel
        assert publisher.ask("stats")["pool"]["direct_channels"] == 1
        os.kill(sub.proc.pid, signal.SIGSTOP)  # alive, reading nothing: its socket's buffer fills
        flood = publisher.ask("flood 600 flood")  # would hang here if a publish waited for it
        os.kill(sub.proc.pid, signal.SIGKILL)
        sub.proc.wait()
        after = publisher.ask("flood 20 after")
        deadline = time.monotonic() + 10
        while publisher.ask("stats")["pool"]["direct_channels"] and time.monotonic() < deadline:
            time.sleep(0.1)
        end = publisher.ask("stats")["pool"]
        publisher.ask("quit")
    assert flood["sent"] - 2 + flood["skipped"] == 600
    assert flood["pool"]["direct_drops"] > 0, flood["pool"]  # frames it could not take: dropped, counted
    assert after["sent"] > flood["sent"]
    assert end["direct_channels"] == 0, end  # the dead subscriber costs nothing any more


def test_a_publisher_killed_mid_run_leaves_its_direct_subscriber_running_and_able_to_stop():
    with peer_group() as start:
        publisher = start(HERE, "publisher", "image", "direct_killed")
        sub = subscriber(start, "left", "direct_killed", 1000000)
        publisher.ask("match 1")
        publisher.ask("burst 5 main left")
        publisher.proc.stdin.write("flood 100000 flood\n")  # publishing as fast as it can when it dies
        publisher.proc.stdin.flush()
        time.sleep(0.5)
        publisher.kill()
        time.sleep(1.0)
        assert sub.proc.poll() is None  # no crash on the channel's end or on reads of a dead pool
        sub.proc.stdin.write("stop\n")  # answered from its main thread: stats() would hang on a stuck delivery
        sub.proc.stdin.flush()
        result, log = sub.finish(30)
    assert sub.proc.returncode == 0, log
    assert result is not None and result["errors"] == [], (result, log)
    assert result["stats"]["direct"]["direct_channels_ended"] == 1, result["stats"]
    assert "Traceback" not in log, log

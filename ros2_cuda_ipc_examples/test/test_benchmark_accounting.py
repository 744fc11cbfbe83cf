"""The benchmark's account of a case's frames: the progress line and the "Frames not verified" notes say the same.

Before: the progress line said ``49/50 sent verified (1 dropped)`` (measured frames only) while the notes said
"2 frames sent but never delivered" (every frame sent less every frame received: a lost warm-up frame counted
too), and a late warm-up tick was counted with the measured frames never sent.  Both now come from
``results.problems``, whose causes add up to the frames not verified, the warm-up frames said apart.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ros2_cuda_ipc_examples.bench import results
from ros2_cuda_ipc_examples.bench.cases import Case
from ros2_cuda_ipc_examples.bench.consumer import ReceivedFrames
from ros2_cuda_ipc_examples.bench.payloads import Payload
from ros2_cuda_ipc_examples.bench.producer import SentFrames

PAYLOAD = Payload("64x48", "image", 64, 48, 4)
#: What can become of one frame, the producer's fates first.
FATES = ("late_ticks", "no_block", "lost", "stale", "errors", "wrong", "ok")


def _account(warmup: int, fates: list[str]) -> dict:
    """A case whose frame ``seq`` met ``fates[seq]``, counted by the producer's and the consumer's own counters."""
    case = Case(0, "latency", "host", PAYLOAD, 30.0, len(fates) - warmup, warmup)
    sent, received = SentFrames(), ReceivedFrames()
    for seq, fate in enumerate(fates):
        measured = seq >= warmup
        if fate in ("late_ticks", "no_block"):
            sent.not_sent(case, seq, fate)
            continue
        sent.sent += 1
        if measured:
            sent.send_us.append(1.0)
        if fate == "lost":
            continue
        received.received += 1
        if fate in ("stale", "errors"):
            if measured:
                setattr(received, fate, getattr(received, fate) + 1)
            continue
        received.bad += fate == "wrong"
        if measured:
            received.measured += 1
            received.verified += fate == "ok"
    return results.case_result(case, sent, received.report(case.index))


def test_a_lost_warm_up_frame_is_not_a_measured_frame_lost() -> None:
    """The issue's case: 50 measured frames after one warm-up frame; the warm-up frame and one measured frame lost."""
    row = _account(1, ["lost", "lost", *["ok"] * 49])
    said = results.problems(row)
    assert (row["verified"], row["measured_sent"], row["dropped"]) == (49, 50, 1)
    assert said == "1 frames sent but never delivered; warm-up frames (not measured): 1 never delivered"
    assert results.problem_notes([row]) == [
        "### Frames not verified", "",
        f"- latency 30 Hz, 64x48, ros2_cuda_ipc host: 49/50 verified; {said}", ""]


def test_a_late_warm_up_tick_is_no_measured_frame_not_sent() -> None:
    row = _account(2, ["late_ticks", "ok", *["ok"] * 5])
    assert (row["verified"], row["measured_sent"], row["frames"], row["late_ticks"]) == (5, 5, 5, 0)
    assert results.problems(row) == "warm-up frames (not measured): 1 not sent"
    assert results.problem_notes([row]) == []  # every measured frame sent and verified


@given(st.integers(0, 5), st.lists(st.sampled_from(FATES), min_size=1, max_size=60))
def test_the_causes_add_up_to_the_frames_not_verified(warmup: int, fates: list[str]) -> None:
    warmup = min(warmup, len(fates) - 1)
    row = _account(warmup, fates)
    causes = results.shortfall(row)
    measured = fates[warmup:]
    for fate in FATES[:-1]:
        assert causes.get(fate, 0) == measured.count(fate), (fate, causes)
    assert sum(causes.values()) == row["frames"] - row["verified"]
    assert row["verified"] + row["dropped"] == row["measured_sent"]
    warm = results.warmup_shortfall(row)
    assert warm.get("not sent", 0) == sum(fate in ("late_ticks", "no_block") for fate in fates[:warmup])
    assert warm.get("never delivered", 0) == fates[:warmup].count("lost")
    assert warm.get("with wrong bytes", 0) == fates[:warmup].count("wrong")


def test_a_direct_subscriptions_own_drops_say_why_a_frame_was_never_delivered() -> None:
    """A direct subscription drops a frame it cannot hand over (stale, invalid, unreadable) before any callback: the
    benchmark saw only "never delivered" (the H200's 199/200, session 10). Its counters, by case, now say why."""
    case = Case(0, "latency", "host-direct", PAYLOAD, 30.0, 3, 0)
    sent, received = SentFrames(), ReceivedFrames()
    for seq in range(3):
        sent.sent += 1
        sent.send_us.append(1.0)
        if seq:
            received.received += 1
            received.measured += 1
            received.verified += 1
    row = results.case_result(case, sent, received.report(case.index, {"stale": 1}))
    assert results.problems(row) == ("1 frames sent but never delivered; "
                                     "the subscription dropped (warm-up included): 1 stale")


def test_the_consumer_reports_each_cases_drops_of_its_typed_subscriptions_not_their_duplicates() -> None:
    from ros2_cuda_ipc_examples.bench.consumer import Consumer

    class Counted:  # a subscription's stats(): its drops by cause, cumulative
        def __init__(self) -> None:
            self.dropped = {"duplicate": 0, "stale": 0}

        def stats(self) -> dict:
            return {"dropped": dict(self.dropped)}

    consumer = Consumer.__new__(Consumer)  # only what _subscription_drops reads
    image, cloud = Counted(), Counted()
    consumer.subscriptions, consumer._subscription_dropped = [image, cloud], {}
    image.dropped.update(duplicate=200, stale=1)
    assert consumer._subscription_drops() == {"stale": 1}
    cloud.dropped["stale"] = 2
    image.dropped["duplicate"] = 400
    assert consumer._subscription_drops() == {"stale": 2}  # the next case: only what it dropped
    assert consumer._subscription_drops() == {}


def test_a_case_ends_only_once_its_last_frame_is_accounted() -> None:
    """A direct subscription's callback runs on its own thread, the end-of-case check on the executor's: a frame
    whose handling has begun but not ended must hold the case's report back.  The direct rows said 199/200 (a
    frame "sent but never delivered") on the H200 and on the CPU VM while every frame had reached the callback."""
    import time

    import rclpy
    from std_msgs.msg import Header

    from ros2_cuda_ipc_examples.bench.cases import Plan
    from ros2_cuda_ipc_examples.bench.consumer import Consumer
    from ros2_cuda_ipc_examples.bench.protocol import frame_id

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("benchmark_accounting", context=context)
    try:
        case = Case(0, "latency", "host", PAYLOAD, 30.0, 2, 0)
        consumer = Consumer(node, Plan((case,), "host", None, 4, 0.01, 2, 1.0))
        consumer.ending[0] = (2, time.monotonic())  # the producer said it sent 2
        consumer._record(case, *consumer._start(Header(frame_id=frame_id(0, 0)))[1:], 0, 1, None, True)
        consumer._start(Header(frame_id=frame_id(0, 1)))  # the second frame's handling began on the direct thread ...
        consumer.report_finished_cases()  # ... when the executor's thread looked
        assert 0 in consumer.ending, "reported with a frame still being handled"
        consumer._record(case, 1, 0, 1, None, True)
        consumer.report_finished_cases()
        assert 0 not in consumer.ending and consumer.frames[0].report(0)["measured"] == 2
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)

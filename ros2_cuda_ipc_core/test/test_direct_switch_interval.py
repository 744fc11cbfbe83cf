"""The interpreter's switch interval while direct receivers live: lowered by the first (only if longer), put back by
the last (only if nothing changed it since); a real DirectReceiver holds it from its start to its close."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from ros2_cuda_ipc_core.direct import receiver as receiver_module
from ros2_cuda_ipc_core.direct.receiver import DirectReceiver
from ros2_cuda_ipc_core.direct.switch_interval import DIRECT_SWITCH_INTERVAL, _SwitchInterval


@pytest.fixture
def interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # Python's default
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_the_first_holder_lowers_it_and_the_last_puts_it_back(interval):
    held = _SwitchInterval()
    held.hold()
    assert sys.getswitchinterval() == pytest.approx(DIRECT_SWITCH_INTERVAL)
    held.hold()
    held.release()
    assert sys.getswitchinterval() == pytest.approx(DIRECT_SWITCH_INTERVAL)  # one holder left
    held.release()
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_a_shorter_interval_is_left_as_it_is(interval):
    sys.setswitchinterval(10e-6)
    held = _SwitchInterval()
    held.hold()
    assert sys.getswitchinterval() == pytest.approx(10e-6)
    held.release()
    assert sys.getswitchinterval() == pytest.approx(10e-6)


def test_an_interval_the_user_set_meanwhile_is_kept(interval):
    held = _SwitchInterval()
    held.hold()
    sys.setswitchinterval(0.001)  # the application's own choice, after the receiver's
    held.release()
    assert sys.getswitchinterval() == pytest.approx(0.001)
    held.hold()  # a later first holder lowers it again, and puts back what it found
    held.release()
    assert sys.getswitchinterval() == pytest.approx(0.001)


def test_a_direct_receiver_holds_it_from_its_start_to_its_close(interval, monkeypatch):
    held = _SwitchInterval()  # this test's own count: receivers other tests left open are not in it
    monkeypatch.setattr(receiver_module, "switch_interval", held)
    receivers = [DirectReceiver(f"test receiver {i}", lambda *args: None, lambda data: data) for i in range(2)]
    assert sys.getswitchinterval() == pytest.approx(DIRECT_SWITCH_INTERVAL)
    receivers[0].close()
    receivers[0].close()  # a second close releases nothing more
    assert sys.getswitchinterval() == pytest.approx(DIRECT_SWITCH_INTERVAL)
    receivers[1].close()
    assert sys.getswitchinterval() == pytest.approx(0.005)
    assert held._holders == 0

"""When a crashed process is started again: doubling waits capped at a minute, forgotten after a minute up (pure,
on a fake clock)."""

from __future__ import annotations

from agl_events.supervise.backoff import Backoff, BackoffPolicy


def _crash_loop(backoff: Backoff, now: float, crashes: int, up_for: float) -> tuple[list[float], float]:
    """Start, run `up_for` seconds, crash, wait as told, `crashes` times; returns the waits and the time after."""
    waits = []
    for _ in range(crashes):
        backoff.started(now)
        now += up_for
        restart_at = backoff.exited(now)
        waits.append(restart_at - now)
        assert not backoff.due(now) and not backoff.due(restart_at - 0.01) and backoff.due(restart_at)
        now = restart_at
    return waits, now


def test_waits_double_from_one_second_up_to_a_minute() -> None:
    waits, _ = _crash_loop(Backoff(), now=1000.0, crashes=9, up_for=0.5)
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]


def test_a_minute_up_forgives_earlier_crashes() -> None:
    backoff = Backoff()
    waits, now = _crash_loop(backoff, now=0.0, crashes=4, up_for=1.0)
    assert waits == [1, 2, 4, 8]
    after_a_long_run, now = _crash_loop(backoff, now=now, crashes=1, up_for=60.0)
    assert after_a_long_run == [1]
    assert _crash_loop(backoff, now=now, crashes=2, up_for=59.0)[0] == [2, 4]  # 59 s is not long enough


def test_policy_is_configurable() -> None:
    waits, _ = _crash_loop(Backoff(BackoffPolicy(initial=0.5, factor=3, maximum=5)), now=0.0, crashes=4, up_for=0)
    assert waits == [0.5, 1.5, 4.5, 5]


def test_nothing_is_due_before_a_crash() -> None:
    backoff = Backoff()
    assert not backoff.due(0.0)
    backoff.started(0.0)
    assert not backoff.due(1e9)

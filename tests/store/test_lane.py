"""A lane runs one blocking client's calls on a thread of its own, in order, and refuses calls once closed."""

from __future__ import annotations

import threading

import pytest

from agl_events.store.lane import Lane


async def test_calls_run_in_order_on_the_lanes_thread_and_errors_reach_the_caller() -> None:
    lane = Lane("test-lane")
    seen: list[tuple[int, str]] = []

    def record(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * 2

    assert [await lane.run(lambda i=i: record(i)) for i in range(3)] == [0, 2, 4]
    assert seen == [(0, "test-lane"), (1, "test-lane"), (2, "test-lane")]

    def fail() -> None:
        raise ValueError("broker said no")

    with pytest.raises(ValueError, match="broker said no"):
        await lane.run(fail)
    lane.close()


async def test_a_closed_lane_refuses_calls_instead_of_leaving_them_waiting() -> None:
    """A second close of a store used to wait forever on its ingester's lane, closed by the first close."""
    lane = Lane("test-lane")
    lane.close()
    lane.close()
    with pytest.raises(RuntimeError, match="closed"):
        await lane.run(lambda: 1)

"""The busy share behind the benchmarks' idle figures, on hand-computed windows."""

import pytest

from agl_events.bench.occupancy import busy_share


def test_intervals_are_clipped_to_the_window_and_shared_over_slots() -> None:
    # window 10..20, 2 slots = 20 slot-seconds; covered: 12..15 (3), 10..20 clipped from 5..25 (10),
    # 18..20 of an open interval (2), nothing of one that ended before the window
    intervals = [(12.0, 15.0), (5.0, 25.0), (18.0, None), (1.0, 9.0)]
    assert busy_share(intervals, slots=2, start=10.0, end=20.0) == pytest.approx(15 / 20)


def test_no_intervals_is_idle_and_an_empty_window_is_refused() -> None:
    assert busy_share([], slots=4, start=0.0, end=1.0) == 0.0
    with pytest.raises(ValueError, match="empty window"):
        busy_share([(0.0, 1.0)], slots=1, start=1.0, end=1.0)

"""How busy a pool of workers was over a window, from the intervals each spent on work: the benchmarks' runner
(and trainer) idle shares. Pure: the intervals come from a store's view (attempts' start and end times) or
from a trainer's step records."""

from __future__ import annotations

from collections.abc import Iterable


def busy_share(intervals: Iterable[tuple[float, float | None]], slots: int, start: float, end: float) -> float:
    """The share of `slots` x (`end` - `start`) the intervals cover, each clipped to the window (an interval
    still open, its end None, counts up to `end`). Intervals of one slot do not overlap, so their clipped
    lengths add up; 1.0 means every slot was busy for the whole window."""
    if end <= start or slots < 1:
        raise ValueError(f"an empty window ({start}, {end}) or no slots ({slots})")
    covered = sum(max(0.0, min(end, stop if stop is not None else end) - max(start, begin))
                  for begin, stop in intervals)
    return covered / (slots * (end - start))

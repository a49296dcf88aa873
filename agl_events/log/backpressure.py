"""How often, and for how long, a bounded queue made its callers wait.

Every queue on the write path is bounded and its policy is to block, never to drop: a caller that finds it
full waits until there is room, so an acknowledged write is always durable and memory stays bounded. This
counter makes those waits visible (the store's `/metrics`, a runner's heartbeat stats), so a slow caller
can be told apart from a slow broker.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class BackpressureStats:
    """Times a caller found the queue full, and the seconds callers spent waiting for room, all told."""

    waits: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {"waits": self.waits, "seconds": round(self.seconds, 6)}


class Backpressure:
    """A thread-safe tally of waits (the producer's callers run on any thread; the committer's on a loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = BackpressureStats()

    def record(self, seconds: float) -> None:
        """One caller waited `seconds` for room in the queue."""
        with self._lock:
            self._stats = BackpressureStats(self._stats.waits + 1, self._stats.seconds + seconds)

    @property
    def stats(self) -> BackpressureStats:
        return self._stats

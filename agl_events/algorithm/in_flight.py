"""What a pipelined GRPO loop has asked runners for and not yet trained on: groups in flight, per version.

Pure bookkeeping (no store, no stream), so the loop's arithmetic can be tested on its own. The loop
enqueues whole groups under the newest weights version and keeps `max_staleness + 1` steps' worth of them
in flight; a batch then takes whole groups from the sample stream, and once a newer version is published
a group still waiting for its samples may have become too old for any batch (the stream's batcher would
skip its samples as stale). Those are given up here, counted, and replaced by fresh ones at the next top-up,
so the loop never waits on a group no batch will take. `max_staleness=0` keeps one step's worth in flight:
the synchronous loop, where each step enqueues exactly the groups it trains on.

Staleness is counted in the versions this loop published. It is the same count as the batcher's resources
generations as long as nothing else publishes resources during the run (GRPO owns them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class InFlight:
    """Groups enqueued by this loop and not yet trained on or given up, by group id -> version enqueued under."""

    groups_per_step: int
    max_staleness: int
    enqueued: int = 0
    trained: int = 0
    dropped: int = 0
    _groups: dict[str, int] = field(default_factory=dict)

    @property
    def pending(self) -> int:
        return len(self._groups)

    def version(self, group_id: str) -> int | None:
        """The version `group_id` was enqueued under, while it is in flight (None once trained or given up)."""
        return self._groups.get(group_id)

    def wanted(self, steps_left: int) -> int:
        """How many groups to enqueue now: up to `max_staleness + 1` steps' worth in flight, never more than
        the steps left will train on."""
        target = min(self.max_staleness + 1, steps_left) * self.groups_per_step
        return max(0, target - len(self._groups))

    def add(self, group_ids: Iterable[str], version: int) -> None:
        """Groups just enqueued under weights `version`."""
        for group_id in group_ids:
            if group_id not in self._groups:
                self._groups[group_id] = version
                self.enqueued += 1

    def train(self, group_ids: Iterable[str]) -> list[int]:
        """Groups a batch took: no longer in flight. Returns the versions of those this loop enqueued
        (a batch may also hold groups a previous trainer of the experiment enqueued: not counted here)."""
        versions = [self._groups.pop(group_id) for group_id in group_ids if group_id in self._groups]
        self.trained += len(versions)
        return versions

    def publish(self, version: int) -> int:
        """Weights `version` are out: groups enqueued more than `max_staleness` versions before it are given
        up (no batch may take them any more). Returns how many."""
        stale = [gid for gid, enqueued in self._groups.items() if version - enqueued > self.max_staleness]
        for group_id in stale:
            del self._groups[group_id]
        self.dropped += len(stale)
        return len(stale)

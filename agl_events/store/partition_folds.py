"""Which partitions a store of a group folds: those holding the rollouts it owns, and the global topics.

A rollout's events (rollouts, attempts, spans topics) are keyed by its id, so partition q of a topic with a
multiple of the rollouts topic's partition count holds exactly the rollouts of rollouts partition q mod that
count (`topics.partition_of` is a CRC modulo the count). A store of a group folds those of the rollouts
partitions it owns, plus every partition of the small global topics (resources, workers), so the group folds
the experiment once in all instead of once per store. On a take-over the new owner starts each partition where
its own view left it (the positions stored with its state: a partition it held before resumes, one it never
held is folded from the log's start) and folds to the log's end before it decides; on a hand-over it stops
folding them once what it decided for them is durable, and keeps their state, stale, for a later take-over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from agl_events.log.records import Position

Change = Callable[[set[Position]], Awaitable[None]]


@dataclass(frozen=True)
class PartitionFolds:
    """`per_rollout`: the per-rollout topics' partition counts by name; `follow`/`unfollow` start and stop
    folding partitions of them."""

    rollout_partitions: int
    per_rollout: Mapping[str, int]
    follow: Change
    unfollow: Change

    def __post_init__(self) -> None:
        uneven = {name: n for name, n in self.per_rollout.items() if n % self.rollout_partitions}
        if uneven:
            raise ValueError(f"topics {uneven} need a multiple of the rollouts topic's {self.rollout_partitions} "
                             f"partitions to be folded by the store owning their rollouts")

    def positions(self, partitions: Iterable[int]) -> set[Position]:
        """The partitions of the per-rollout topics holding the rollouts of rollouts `partitions`."""
        owned = set(partitions)
        return {(name, q) for name, count in self.per_rollout.items() for q in range(count)
                if q % self.rollout_partitions in owned}

    def is_global(self, position: Position) -> bool:
        """Folded by every store of the group (resources, workers)."""
        return position[0] not in self.per_rollout

    async def take(self, partitions: Iterable[int]) -> None:
        await self.follow(self.positions(partitions))

    async def drop(self, partitions: Iterable[int]) -> None:
        await self.unfollow(self.positions(partitions))

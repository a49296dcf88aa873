"""Cutting a stream of samples into training batches: by size, by complete groups, within a staleness bound.

Pure (no Kafka): `SampleStream` feeds it what it consumes and asks it what may be committed. Why the
offsets live here: a sample held back (its group is not complete yet) must be read again by a restarted
trainer, so the committable offset of a partition is the lowest offset still held there, not the last one
read. Samples already handed out in a batch are the caller's; they count as done once it commits.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from agl_events.samples.generations import is_stale
from agl_events.samples.model import Sample

Position = tuple[str, int]  # (topic, partition)

#: How many sample ids the batcher remembers for dedupe (re-emits come soon after the original).
SEEN_CAPACITY = 200_000


class BatchPolicy(BaseModel):
    """What makes a batch. Grouped when a group size is known: the policy's, else each sample's own."""

    batch_size: int = Field(default=32, ge=1, description="samples per batch (whole groups: at least this many)")
    group_size: int | None = Field(default=None, ge=1, description="samples per group; None: the samples' own")
    grouped: bool = Field(default=True, description="wait for complete groups when a group size is known")
    max_staleness: int | None = Field(default=None, ge=0,
                                      description="accept samples at most this many resources generations old")
    modes: frozenset[str] | None = Field(default=frozenset({"train"}), description="rollout modes to keep; None: all")
    statuses: frozenset[str] | None = Field(default=None, description="final statuses to keep; None: all")


@dataclass
class BatchStats:
    """What the batcher did with what it was offered (a trainer logs these)."""

    accepted: int = 0
    batched: int = 0
    duplicates: int = 0
    skipped_stale: int = 0
    skipped_filtered: int = 0
    dropped_revoked: int = 0


@dataclass
class Consumed:
    """A sample as read: where from (a step record names it so, see `samples.steps`)."""

    sample: Sample
    position: Position
    offset: int


@dataclass
class SampleBatch:
    """Samples to train on, in whole groups when grouped (`groups` in the order they completed)."""

    groups: list[list[Sample]]
    #: Where each of its samples was read (empty for batches made up by hand).
    consumed: list[Consumed] = field(default_factory=list)

    @property
    def samples(self) -> list[Sample]:
        return [sample for group in self.groups for sample in group]

    def __len__(self) -> int:
        return sum(len(group) for group in self.groups)


@dataclass
class Batcher:
    """`keep_stale`: remember the samples skipped as stale until `drain_stale` (a trainer that records its
    steps drains them each step; others would only pile them up)."""

    policy: BatchPolicy
    keep_stale: bool = False
    stats: BatchStats = field(default_factory=BatchStats)
    _pending: dict[str, list[Consumed]] = field(default_factory=dict)  # incomplete groups, by group id
    _ready: list[list[Consumed]] = field(default_factory=list)  # complete groups (or single samples), in order
    _consumed: dict[Position, int] = field(default_factory=dict)  # next offset after the last one offered
    _seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _stale: list[Consumed] = field(default_factory=list)  # skipped as stale since the last `drain_stale`

    def offer(self, sample: Sample, position: Position, offset: int, current: int | None) -> None:
        """Take one consumed sample; `current` is the latest resources generation the trainer knows."""
        self._consumed[position] = max(self._consumed.get(position, 0), offset + 1)
        if sample.sample_id in self._seen:
            self.stats.duplicates += 1
            return
        self._remember(sample.sample_id)
        if not self._wanted(sample):
            self.stats.skipped_filtered += 1
            return
        held = Consumed(sample, position, offset)
        if is_stale(sample.resources_generation, current, self.policy.max_staleness):
            self.stats.skipped_stale += 1
            self._keep_stale([held])
            return
        self.stats.accepted += 1
        size = self._group_size(sample)
        if size is None:
            self._ready.append([held])
            return
        group = self._pending.setdefault(sample.group_id, [])
        group.append(held)
        if len(group) >= size:
            self._ready.append(self._pending.pop(sample.group_id))

    def take(self, current: int | None, partial: bool = False) -> SampleBatch | None:
        """A batch once `batch_size` samples are ready in whole groups (or whatever is ready, if `partial`).

        Groups that became too stale while waiting are dropped first (counted as skipped_stale).
        """
        self._drop_stale(current)
        ready = sum(len(group) for group in self._ready)
        if ready == 0 or (ready < self.policy.batch_size and not partial):
            return None
        groups: list[list[Consumed]] = []
        taken = 0
        while self._ready and taken < self.policy.batch_size:
            group = self._ready.pop(0)
            groups.append(group)
            taken += len(group)
        self.stats.batched += taken
        return SampleBatch([[held.sample for held in group] for group in groups],
                           [held for group in groups for held in group])

    def drain_stale(self) -> list[Consumed]:
        """The samples skipped as stale since the last call (at offer, or while their group waited)."""
        stale, self._stale = self._stale, []
        return stale

    def known(self, sample_ids: Iterable[str]) -> None:
        """Ids finished with before this batcher started (a restarted trainer's committed steps): skipped as
        duplicates when read again."""
        for sample_id in sample_ids:
            self._remember(sample_id)

    def committable(self) -> dict[Position, int]:
        """Per partition, the offset a restarted trainer must read from: the lowest held one, else past the last."""
        offsets = dict(self._consumed)
        for held in self._held():
            offsets[held.position] = min(offsets[held.position], held.offset)
        return offsets

    def revoke(self, positions: Iterable[Position]) -> None:
        """Forget partitions given to another consumer: it reads their held samples again from the commit
        (and so may this one, should they come back: their ids are forgotten too)."""
        gone = set(positions)
        for position in gone:
            self._consumed.pop(position, None)
        dropped = [held for held in self._held() if held.position in gone]
        ready, self._ready = self._ready, []
        for group in ready:  # a group that lost members waits again for them, still held
            kept = [held for held in group if held.position not in gone]
            if len(kept) == len(group):
                self._ready.append(group)
            elif kept:
                self._pending[kept[0].sample.group_id] = kept
        self._pending = {gid: kept for gid, group in self._pending.items()
                         if (kept := [held for held in group if held.position not in gone])}
        for held in dropped:
            self._seen.pop(held.sample.sample_id, None)
        self.stats.dropped_revoked += len(dropped)

    @property
    def held(self) -> int:
        return sum(1 for _ in self._held())

    # -- internals ------------------------------------------------------------------------------
    def _held(self) -> Iterable[Consumed]:
        for group in self._pending.values():
            yield from group
        for group in self._ready:
            yield from group

    def _group_size(self, sample: Sample) -> int | None:
        if not self.policy.grouped:
            return None
        return self.policy.group_size or sample.group_size

    def _wanted(self, sample: Sample) -> bool:
        modes, statuses = self.policy.modes, self.policy.statuses
        return (modes is None or (sample.mode or "") in modes) and (statuses is None or sample.status in statuses)

    def _drop_stale(self, current: int | None) -> None:
        def fresh(group: list[Consumed]) -> bool:
            stale = is_stale(group[0].sample.resources_generation, current, self.policy.max_staleness)
            if stale:
                self.stats.skipped_stale += len(group)
                self._keep_stale(group)
            return not stale

        self._ready = [group for group in self._ready if fresh(group)]
        self._pending = {gid: group for gid, group in self._pending.items() if fresh(group)}

    def _keep_stale(self, consumed: list[Consumed]) -> None:
        if self.keep_stale:
            self._stale.extend(consumed)

    def _remember(self, sample_id: str) -> None:
        self._seen[sample_id] = None
        if len(self._seen) > SEEN_CAPACITY:
            self._seen.popitem(last=False)

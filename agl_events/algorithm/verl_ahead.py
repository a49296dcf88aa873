"""Which finished groups fill the rows of verl's next batch, when rollouts may run ahead of its trainer.

verl's trainer asks for one batch per step: `rollout.n` rows per prompt, rows of a prompt sharing its `uid`
(`verl_manager`). Synchronously (`max_staleness=0`) each prompt's rows are answered by the group enqueued
for it in the same call. With `max_staleness=k`, the groups of a call stay in flight across later calls:
each call tops the groups in flight up to `k + 1` calls' worth (its own prompts' groups, plus, where
groups are missing, more groups of its prompts: at the first call, and to replace groups given up), and its
rows are filled with whole groups that have finished, oldest first, from this call or from up to `k` calls
(verl steps, the weights versions) before it; the rest stay in flight and run while verl trains. A group
still unfinished when it becomes more than `k` versions old is given up, and the samples it still sends are
counted as stale. A slot takes a group of its own size (verl pads a batch by repeating rows, so
one uid may have more rows than `rollout.n`), and a finished group of this call goes into its own rows, so
with `k=0` every row is answered by its own rollout, as before.

A row filled by an older group keeps the uid verl gave the slot (verl joins its batch to ours row by row
and GRPO needs only that a group's rows share a uid); what the row answers is in its sample. Pure
bookkeeping over `InFlight` (the staleness rule and its counts, shared with GRPO); no store, no stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count

from agl_events.algorithm.in_flight import InFlight
from agl_events.samples.model import Sample


@dataclass
class Taken:
    """A batch's groups, by the slot (verl uid) whose rows they fill."""

    #: Slot uid -> the group's samples, one per row of the slot, in the order its rollouts were enqueued.
    samples: dict[str, list[Sample]]
    #: Slot uid -> the weights version the group was enqueued under.
    versions: dict[str, int]


@dataclass
class AheadPool:
    """verl's groups in flight across `generate` calls, and the samples that have come back for them."""

    max_staleness: int
    #: Samples of given-up groups that came back after all, and samples of rollouts this pool never enqueued.
    stale_samples: int = 0
    foreign_samples: int = 0
    flight: InFlight = field(init=False)
    _members: dict[str, list[str]] = field(default_factory=dict)  # group key -> its rollout ids, in order
    _group_of: dict[str, str] = field(default_factory=dict)  # rollout id -> group key
    _samples: dict[str, Sample] = field(default_factory=dict)  # rollout id -> its sample, until trained
    _given_up: set[str] = field(default_factory=set)  # rollout ids of groups given up as stale
    _keys: count = field(default_factory=count)

    def __post_init__(self) -> None:
        self.flight = InFlight(groups_per_step=0, max_staleness=self.max_staleness)  # set by each `top_up`

    def top_up(self, groups_per_call: int) -> int:
        """How many groups to enqueue at a call of `groups_per_call` prompts, its own included: up to
        `max_staleness + 1` calls' worth in flight (exactly its own with `max_staleness=0`)."""
        self.flight.groups_per_step = groups_per_call
        return self.flight.wanted(self.max_staleness + 1)

    def publish(self, version: int) -> int:
        """Weights `version` are out: groups enqueued more than `max_staleness` versions before are given up.
        Returns how many."""
        dropped = self.flight.publish(version)
        for key in [key for key in self._members if self.flight.version(key) is None]:
            for rollout_id in self._members.pop(key):
                del self._group_of[rollout_id]
                self._samples.pop(rollout_id, None)
                self._given_up.add(rollout_id)
        return dropped

    def add(self, rollout_ids: Sequence[str], version: int) -> str:
        """A group just enqueued under weights `version`: its key."""
        key = f"{next(self._keys)}"
        self._members[key] = list(rollout_ids)
        self._group_of.update((rollout_id, key) for rollout_id in rollout_ids)
        self.flight.add([key], version)
        return key

    def offer(self, sample: Sample) -> None:
        """A sample from the stream: kept if its group is in flight, else counted (stale or foreign)."""
        if sample.rollout_id in self._group_of:
            self._samples[sample.rollout_id] = sample
        elif sample.rollout_id in self._given_up:
            self.stale_samples += 1
        else:
            self.foreign_samples += 1

    def take(self, own: Mapping[str, str]) -> Taken | None:
        """Fill the slots `own` (slot uid -> the key of the group enqueued for it in this call) with finished
        groups of the slot's size, oldest version first; None while some size has too few finished groups.
        The groups taken are no longer in flight."""
        finished = [key for key, members in self._members.items() if all(r in self._samples for r in members)]
        finished.sort(key=lambda key: self.flight.version(key) or 0)  # stable: enqueue order within a version
        chosen: dict[str, str] = {}  # slot uid -> group key
        for size in {len(self._members[key]) for key in own.values()}:
            slots = [uid for uid, key in own.items() if len(self._members[key]) == size]
            groups = [key for key in finished if len(self._members[key]) == size][:len(slots)]
            if len(groups) < len(slots):
                return None
            others = iter(key for key in groups if key not in own.values())
            chosen.update({uid: own[uid] if own[uid] in groups else next(others) for uid in slots})
        versions = dict(zip(chosen, self.flight.train(chosen.values()), strict=True))
        samples = {uid: [self._samples.pop(r) for r in self._members[key]] for uid, key in chosen.items()}
        for key in chosen.values():
            for rollout_id in self._members.pop(key):
                del self._group_of[rollout_id]
        return Taken(samples, versions)

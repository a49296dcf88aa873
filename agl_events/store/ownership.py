"""Which rollouts this store process decides for, when several store processes share an experiment.

A rollout's attempts, spans, sequence counter and status depend only on events keyed by its id, which all
land in one partition of each topic; so stores can share an experiment by partition of the rollouts topic:
each decides for the rollouts of the partitions it owns (the store group, `store.membership`, hands them
out) and forwards the rest to their owner (`store.peers`). Pure: what a store may decide, and whom to ask
otherwise; the group and HTTP live at the edges.

Two decisions are not about an existing rollout and stay local without coordination:
- a new rollout gets an id that falls in a partition this store owns (`Placement.new_rollout_id`), so its
  creator is its owner;
- queue positions are drawn congruent to the rollout's partition (`Placement.queue_seq_after`), so owners
  of different partitions never draw the same one, and one owner's positions still rise in FIFO order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agl_events.store.ids import new_rollout_id
from agl_events.topics import partition_of


@dataclass(frozen=True)
class Placement:
    """The partitions of the rollouts topic (`partitions`) and those decided here (`owned`; None: all)."""

    partitions: int = 1
    owned: frozenset[int] | None = None

    def partition(self, rollout_id: str) -> int:
        return partition_of(rollout_id, self.partitions)

    def owns(self, rollout_id: str) -> bool:
        return self.owned is None or self.partition(rollout_id) in self.owned

    @property
    def owns_any(self) -> bool:
        return self.owned is None or bool(self.owned)

    def new_rollout_id(self) -> str:
        """A fresh id in a partition owned here (a few draws: ids are uniform over partitions)."""
        if not self.owns_any:
            raise ValueError("this store owns no partition to create rollouts in")
        while True:
            rid = new_rollout_id()
            if self.owns(rid):
                return rid

    def queue_seq_after(self, last: int, rollout_id: str) -> int:
        """The smallest position above `last` congruent to the rollout's partition."""
        after = last + 1
        return after + (self.partition(rollout_id) - after) % self.partitions


#: A store deciding for everything: the in-memory store, or a Kafka store outside any store group.
EVERYWHERE = Placement()


@dataclass
class Ownership:
    """What the store group has said so far: the partitions owned here (caught up and deciding), those being
    taken over (the view still catching up with what the previous owner wrote), and every partition's owner.

    `changed` is set on every change, for callers waiting to learn where a rollout's owner is."""

    partitions: int
    own_url: str
    owned: frozenset[int] = frozenset()
    acquiring: frozenset[int] = frozenset()
    owners: dict[int, str] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def placement(self) -> Placement:
        return Placement(self.partitions, self.owned)

    def acquire(self, partitions: Iterable[int]) -> None:
        self.acquiring = self.acquiring | frozenset(partitions)
        self._changed()

    def acquired(self, partitions: Iterable[int]) -> frozenset[int]:
        """Those of `partitions` still being acquired become ours (returned): one released during the catch-up
        (a take-over outlasting its callback's bound, then revoked) stays another member's."""
        taken = frozenset(partitions) & self.acquiring
        self.acquiring = self.acquiring - taken
        self.owned = self.owned | taken
        self.owners.update(dict.fromkeys(taken, self.own_url))
        self._changed()
        return taken

    def release(self, partitions: Iterable[int]) -> None:
        gone = frozenset(partitions)
        self.owned = self.owned - gone
        self.acquiring = self.acquiring - gone
        for partition in gone:
            if self.owners.get(partition) == self.own_url:
                del self.owners[partition]
        self._changed()

    def learn(self, owners: Mapping[int, str]) -> None:
        """The group's assignment as last described; our own partitions are ours only once caught up."""
        self.owners = {p: url for p, url in owners.items() if url != self.own_url or p in self.owned}
        self._changed()

    def where(self, rollout_id: str) -> str | None:
        """Where to decide for `rollout_id`: `own_url` here, another store's URL, or None (nobody known yet,
        or ours still catching up: wait for `changed`)."""
        return self.owner_of(partition_of(rollout_id, self.partitions))

    def owner_of(self, partition: int) -> str | None:
        """Where to decide for `partition`, as `where` says for its rollouts."""
        if partition in self.owned:
            return self.own_url
        if partition in self.acquiring:
            return None
        return self.owners.get(partition)

    def unowned(self, what: str, partitions: Iterable[int]) -> str:
        """Why nobody decides for `partitions` (`what`, in words) yet: this store still folding those it was
        given (after its start, or a take-over: a long history takes minutes), or no store of the group
        listed as owning them."""
        catching_up = sorted(set(partitions) & self.acquiring)
        if catching_up:
            return (f"this store is still catching up partitions {catching_up}, folding what the log holds for "
                    f"them after its start or a take-over ({len(self.owned)} of {self.partitions} partitions ready "
                    f"here); {what} waits for that: try again shortly")
        return f"no store of the group owns {what}"

    def any_other(self) -> list[str]:
        """Every other store that owns something, each once."""
        return sorted({url for url in self.owners.values() if url != self.own_url})

    def wake(self) -> None:
        """Wake everyone waiting for a change without one (the store is closing: they give up)."""
        self._changed()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

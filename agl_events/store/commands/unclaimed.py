"""Queued rollouts nobody claims: announced to the runners again, at doubling intervals.

The runners' share group (KIP-932) counts every acquisition of a task record as a delivery, whether the runner
then runs it, hands it back (stepping aside, stopping) or lets its lock expire. Past the group's delivery count
limit the broker archives the record and never hands it out again, while the rollout stays queued in the view:
nothing would ever run it. So the store, which alone knows what is still queued, dispatches a rollout again
once it has waited `after` seconds unclaimed at one place in the queue, then after twice as long, and so on, but
only where its record looks lost: the queue has not moved for `after` seconds (nothing taken from it), or
entries that came at least `after` seconds after it were taken first. A queue that is merely long and moving in
order costs no extra record (a run enqueuing thousands at once would otherwise announce each a few times, every
copy a refused claim). Announcing twice is harmless (claims are decided by the store: a rollout no longer queued
is refused, `commands.tasks.claim`).

A scan costs what changed and what is due, not the queue's length (a deep queue is scanned every few seconds):
the queue's entries come in as the view writes them (`written`), and both rules mark a prefix of the entries in
the order they were first seen (every entry first seen before a time `lost_through` looks lost), so the entries
never announced are kept in that order and only the lost ones at its front are visited; the announced ones wait
in a heap by when they are due again.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from agl_events.store.commands.dispatch import announce
from agl_events.store.context import DecisionContext


@dataclass
class _Waiting:
    rid: str
    since: float  # when this queue entry was first seen
    due: float  # when it is announced again unless claimed first
    parked: bool = False  # due, but its record did not look lost then: announced once it does


class Unclaimed:
    """Which queue entries have waited unclaimed long enough to be announced again, on the caller's clock. An
    entry is a place in the queue (a requeued rollout has a new one, and waits afresh)."""

    def __init__(self, after: float) -> None:
        self._after = after
        self._written: list[tuple[str, str | None]] = []  # queue entries written since the last `due`
        self._waiting: dict[str, _Waiting] = {}  # every entry queued, by entry
        self._fresh: OrderedDict[str, None] = OrderedDict()  # those never announced, in the order first seen
        self._announced: list[tuple[float, str]] = []  # (due, entry) of those announced, a heap; stale items skipped
        self._parked: list[tuple[float, str]] = []  # (since, entry) of those due but not lost yet, a heap
        self._moved: float | None = None  # when an entry was last seen taken from the queue
        self._newest_taken: float | None = None  # the latest `since` among the entries taken so far

    def written(self, entries: Iterable[tuple[str, str | None]]) -> None:
        """Queue entries as the view wrote them: (entry, rollout id) queued, (entry, None) taken from the queue
        (claimed, cancelled or requeued elsewhere). Timed at the next `due`."""
        self._written.extend(entries)

    def due(self, now: float) -> list[str]:
        """The rollouts due at `now`: of entries never announced, those lost; of those announced, those due and
        lost. An entry queued and taken between two calls is never seen."""
        self._take_in(now)
        lost_through = self._lost_through(now)
        due: list[str] = []
        while self._parked and lost_through is not None and self._parked[0][0] <= lost_through:
            _, entry = heapq.heappop(self._parked)
            seen = self._waiting.get(entry)
            if seen is not None and seen.parked:
                seen.parked = False
                due.append(self._announce(entry, seen, now))
        while self._announced and self._announced[0][0] <= now:
            at, entry = heapq.heappop(self._announced)
            seen = self._waiting.get(entry)
            if seen is None or seen.due != at or seen.parked:
                continue  # taken, or announced again since
            if lost_through is not None and seen.since <= lost_through:
                due.append(self._announce(entry, seen, now))
            else:
                seen.parked = True
                heapq.heappush(self._parked, (seen.since, entry))
        while self._fresh and lost_through is not None:
            entry = next(iter(self._fresh))
            seen = self._waiting[entry]
            if seen.since > lost_through:
                break
            del self._fresh[entry]
            due.append(self._announce(entry, seen, now))  # first seen `after` before `lost_through`: due
        return due

    def _take_in(self, now: float) -> None:
        """Time what was written since the last call: new entries first seen now, and the entries taken."""
        final = dict(self._written)  # an entry's last write (its place is never reused)
        self._written = []
        taken: list[float] = []
        for entry, rid in final.items():
            if rid is not None:
                if entry not in self._waiting:
                    self._waiting[entry] = _Waiting(rid, since=now, due=now + self._after)
                    self._fresh[entry] = None
                continue
            seen = self._waiting.pop(entry, None)
            if seen is not None:
                self._fresh.pop(entry, None)
                taken.append(seen.since)
        if taken:
            self._moved = now
            self._newest_taken = max([*taken, *([] if self._newest_taken is None else [self._newest_taken])])

    def _lost_through(self, now: float) -> float | None:
        """Entries first seen at or before this look lost (None: none does): the queue stood still for `after`
        seconds while they waited, or they were overtaken by entries queued `after` seconds after them."""
        bounds = [] if self._newest_taken is None else [self._newest_taken - self._after]
        if self._moved is None or now - self._moved >= self._after:
            bounds.append(now - self._after)
        return max(bounds, default=None)

    def _announce(self, entry: str, seen: _Waiting, now: float) -> str:
        """`entry` is announced now: due again after twice as long as it has waited."""
        seen.due = now + (now - seen.since)
        heapq.heappush(self._announced, (seen.due, entry))
        return seen.rid


def redispatch(ctx: DecisionContext, rids: Iterable[str]) -> int:
    """Dispatch these rollouts again where they are still queued (and owned here); how many were."""
    return sum(announce(ctx, rid) for rid in rids)

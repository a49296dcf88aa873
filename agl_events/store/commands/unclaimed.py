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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agl_events.store.commands.dispatch import announce
from agl_events.store.context import DecisionContext


@dataclass(frozen=True)
class _Waiting:
    since: float  # when this queue entry was first seen
    due: float  # when it is announced again unless claimed first


class Unclaimed:
    """Which queue entries have waited unclaimed long enough to be announced again, on the caller's clock. An
    entry is a place in the queue (a requeued rollout has a new one, and waits afresh)."""

    def __init__(self, after: float) -> None:
        self._after = after
        self._waiting: dict[str, _Waiting] = {}
        self._moved: float | None = None  # when an entry was last seen taken from the queue
        self._newest_taken: float | None = None  # the latest `since` among the entries taken so far

    def due(self, queue: Iterable[tuple[str, str]], now: float) -> list[str]:
        """The rollouts of `queue` ((entry, rollout id) pairs, the whole queue) due at `now`; entries no longer
        queued are forgotten (taken: claimed, cancelled or requeued elsewhere)."""
        entries = list(queue)
        present = {entry for entry, _ in entries}
        taken = [seen.since for entry, seen in self._waiting.items() if entry not in present]
        if taken:
            self._moved = now
            self._newest_taken = max([*taken, *([] if self._newest_taken is None else [self._newest_taken])])
        waiting: dict[str, _Waiting] = {}
        due: list[str] = []
        for entry, rid in entries:
            seen = self._waiting.get(entry) or _Waiting(since=now, due=now + self._after)
            if now >= seen.due and self._looks_lost(seen, now):
                due.append(rid)
                seen = _Waiting(since=seen.since, due=now + (now - seen.since))
            waiting[entry] = seen
        self._waiting = waiting
        return due

    def _looks_lost(self, seen: _Waiting, now: float) -> bool:
        """The queue stood still for `after` seconds while this entry waited, or it was overtaken by entries
        queued `after` seconds after it."""
        stalled_since = seen.since if self._moved is None else max(seen.since, self._moved)
        overtaken = self._newest_taken is not None and self._newest_taken >= seen.since + self._after
        return now - stalled_since >= self._after or overtaken


def redispatch(ctx: DecisionContext, rids: Iterable[str]) -> int:
    """Dispatch these rollouts again where they are still queued (and owned here); how many were."""
    return sum(announce(ctx, rid) for rid in rids)

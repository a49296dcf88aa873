"""Queued rollouts nobody claims: announced to the runners again, at doubling intervals.

The runners' share group (KIP-932) counts every acquisition of a task record as a delivery, whether the runner
then runs it, hands it back (stepping aside, stopping) or lets its lock expire. Past the group's delivery count
limit the broker archives the record and never hands it out again, while the rollout stays queued in the view:
nothing would ever run it. So the store, which alone knows what is still queued, dispatches a rollout again
once it has waited `after` seconds unclaimed at one place in the queue, then after twice as long, and so on: a
queue that is merely long costs a few extra records per rollout, not one a period. Announcing twice is harmless
(claims are decided by the store: a rollout no longer queued is refused, `commands.tasks.claim`).
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

    def due(self, queue: Iterable[tuple[str, str]], now: float) -> list[str]:
        """The rollouts of `queue` ((entry, rollout id) pairs, the whole queue) due at `now`; entries no longer
        queued are forgotten."""
        waiting: dict[str, _Waiting] = {}
        due: list[str] = []
        for entry, rid in queue:
            seen = self._waiting.get(entry) or _Waiting(since=now, due=now + self._after)
            if now >= seen.due:
                due.append(rid)
                seen = _Waiting(since=seen.since, due=now + (now - seen.since))
            waiting[entry] = seen
        self._waiting = waiting
        return due


def redispatch(ctx: DecisionContext, rids: Iterable[str]) -> int:
    """Dispatch these rollouts again where they are still queued (and owned here); how many were."""
    return sum(announce(ctx, rid) for rid in rids)

"""Announcing a rollout that entered the queue on the tasks topic, for runners to claim (see `tasks`)."""

from __future__ import annotations

from typing import Any

from agl_events.events.jsontext import dumps
from agl_events.events.typed import TaskDispatched
from agl_events.reducers import keys
from agl_events.store.context import DecisionContext
from agl_events.types import QUEUING_STATUSES


def dispatch(ctx: DecisionContext, rollout: dict[str, Any], queue_seq: int) -> None:
    ctx.emit(TaskDispatched(rollout_id=rollout["rollout_id"], resources_id=rollout["resources_id"],
                            mode=rollout["mode"], input_json=dumps(rollout["input"]), queue_seq=queue_seq))


def announce_queued(ctx: DecisionContext) -> int:
    """Dispatch every rollout waiting in the queue again; returns how many.

    A rollout's RolloutEnqueued and its TaskDispatched go out through two producers (tasks need record
    batches of their own), so a store killed between the two acknowledgements can leave a queued rollout
    that no runner ever hears of; its request is not acknowledged, but an ingested task request is then
    found in the key index on re-read and never enqueued again. A starting store therefore announces
    the whole queue once more. A second announcement is harmless: runners claim through the store, and a
    claim of a rollout no longer queued is refused (`commands.tasks.claim`).
    """
    return sum(announce(ctx, rid) for _, rid in list(ctx.scan(keys.QUEUE)))


def announce(ctx: DecisionContext, rid: str) -> bool:
    """Dispatch `rid` again at its place in the queue if it is still queued and this store owns it (another store
    of the group announces its own); whether it did."""
    if not ctx.placement.owns(rid):
        return False
    rollout = ctx.rollout(rid)
    queue_seq = ctx.get(keys.queued(rid))
    if rollout is None or rollout["status"] not in QUEUING_STATUSES or queue_seq is None:
        return False
    dispatch(ctx, rollout, queue_seq)
    return True

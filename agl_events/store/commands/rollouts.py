"""Rollout decisions: create (queued or started), update, dequeue, and manual retries."""

from __future__ import annotations

import copy
from typing import Any

from agl_events.events.typed import Rollout as RolloutRecord
from agl_events.events.typed import RolloutEnqueued, RolloutStarted, RolloutUpdated
from agl_events.reducers import keys
from agl_events.store.commands.attempts import create_attempt, set_rollout_status
from agl_events.store.commands.dispatch import dispatch
from agl_events.store.commands.finished import announce_finished
from agl_events.store.commands.workers import mark_idle_after_empty_dequeue, sync_worker_with_attempt
from agl_events.store.context import DecisionContext
from agl_events.types import FINISHED_STATUSES, QUEUING_STATUSES, UNSET, Rollout, RolloutConfig


def _new_rollout(ctx: DecisionContext, input: Any, mode: Any, resources_id: str | None,
                 config: RolloutConfig | None, metadata: dict[str, Any] | None, status: str) -> dict[str, Any]:
    rollout = Rollout(
        rollout_id=ctx.placement.new_rollout_id(), input=copy.deepcopy(input), start_time=ctx.tick(), mode=mode,
        resources_id=resources_id if resources_id is not None else ctx.latest_resources_id(),
        status=status, config=(config or RolloutConfig()).model_copy(deep=True),
        metadata=dict(metadata) if metadata is not None else {},
    )
    return rollout.model_dump(mode="json")


def enqueue_rollout(ctx: DecisionContext, input: Any, mode: Any = None, resources_id: str | None = None,
                    config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    rollout = _new_rollout(ctx, input, mode, resources_id, config, metadata, "queuing")
    queue_seq = ctx.next_queue_seq(rollout["rollout_id"])
    ctx.emit(RolloutEnqueued(rollout=RolloutRecord.of(rollout), queue_seq=queue_seq))
    dispatch(ctx, rollout, queue_seq)
    return rollout


def start_rollout(ctx: DecisionContext, input: Any, mode: Any = None, resources_id: str | None = None,
                  config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None,
                  worker_id: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    rollout = _new_rollout(ctx, input, mode, resources_id, config, metadata, "preparing")
    ctx.emit(RolloutStarted(rollout=RolloutRecord.of(rollout)))
    attempt = create_attempt(ctx, rollout["rollout_id"], worker_id)
    sync_worker_with_attempt(ctx, attempt)
    return rollout, attempt


def dequeue_rollouts(ctx: DecisionContext, limit: int, worker_id: str | None
                     ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Claim up to `limit` rollouts from the head of the FIFO queue, each exactly once: of the rollouts this
    store owns, when several stores share the experiment."""
    claimed: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for rid in _claimable(ctx, limit):
        attempt = create_attempt(ctx, rid, worker_id)
        set_rollout_status(ctx, rid, "preparing", "dequeue")
        claimed.append((ctx.rollout(rid), attempt))  # type: ignore[arg-type]
    if worker_id is not None:
        if claimed:
            sync_worker_with_attempt(ctx, claimed[-1][1], dequeue=True)
        else:
            mark_idle_after_empty_dequeue(ctx, worker_id)
    return claimed


def _claimable(ctx: DecisionContext, limit: int) -> list[str]:
    """The first `limit` rollouts of the queue this store may claim. Picked before any is claimed (claiming
    changes the queue under the scan) and read only as far as needed: a claim costs what it takes, not the
    queue's length (a full scan read every queued rollout for every claim)."""
    picked: list[str] = []
    if limit <= 0:
        return picked
    for _, rid in ctx.scan(keys.QUEUE):
        if not ctx.placement.owns(rid):  # its owner dequeues it (`store.ownership`: FIFO per store)
            continue
        rollout = ctx.rollout(rid)
        if rollout is not None and rollout["status"] in QUEUING_STATUSES and rid not in picked:
            picked.append(rid)
            if len(picked) >= limit:
                break
    return picked


def start_attempt(ctx: DecisionContext, rid: str, worker_id: str | None
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    rollout = ctx.rollout(rid)
    if rollout is None:
        raise ValueError(f"Rollout {rid} not found")
    attempt = create_attempt(ctx, rid, worker_id)
    if rollout["status"] != "preparing":
        set_rollout_status(ctx, rid, "preparing", "attempt")
    sync_worker_with_attempt(ctx, attempt)
    return ctx.rollout(rid), attempt  # type: ignore[return-value]


def update_rollout(ctx: DecisionContext, rid: str, **given: Any) -> dict[str, Any]:
    """Replace every given field (None included); no transition checks, as upstream."""
    rollout = ctx.rollout(rid)
    if rollout is None:
        raise ValueError(f"Item with rollout_id={rid} does not exist")
    changes = {k: v for k, v in given.items() if v is not UNSET}
    if "config" in changes and isinstance(changes["config"], RolloutConfig):
        changes["config"] = changes["config"].model_dump()
    updated = Rollout.model_validate({**rollout, **changes}).model_dump(mode="json")
    changed = list(changes)
    status = changes.get("status")
    if status in FINISHED_STATUSES:
        updated["end_time"] = ctx.now
        changed.append("end_time")
    queue_seq = None
    if status in QUEUING_STATUSES and ctx.get(keys.queued(rid)) is None:
        queue_seq = ctx.next_queue_seq(rid)
    ctx.emit(RolloutUpdated(rollout=RolloutRecord.of(updated), changed=changed, queue_seq=queue_seq))
    announce_finished(ctx, rid, rollout["status"])
    if queue_seq is not None:
        dispatch(ctx, updated, queue_seq)
    return updated

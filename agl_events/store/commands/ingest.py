"""Ingesting task requests: each idempotency key becomes one enqueued rollout, however often it arrives.

"Already enqueued?" is a read of the view's key index (`keys.task_key`, folded from the RolloutEnqueued event
that carries the key in the rollout's metadata), so a duplicate record, a producer retry or a replay after a
restart finds the rollout that key became and enqueues nothing.
"""

from __future__ import annotations

from agl_events.events.task_request import InvalidTaskRequest, TaskRequest
from agl_events.reducers import keys
from agl_events.reducers.rollouts import TASK_KEY
from agl_events.store.commands.rollouts import enqueue_rollout
from agl_events.store.context import DecisionContext


def ingest_task(ctx: DecisionContext, key: str, request: TaskRequest) -> tuple[str, bool]:
    """(rollout id, whether it was enqueued now) for the request with idempotency key `key`."""
    existing = ctx.get(keys.task_key(key))
    if existing is not None:
        return existing, False
    if request.resources_id is not None and ctx.get(keys.resources(request.resources_id)) is None:
        raise InvalidTaskRequest(f"unknown resources id {request.resources_id!r}")
    metadata = {**(request.metadata or {}), TASK_KEY: key}
    rollout = enqueue_rollout(ctx, request.input, request.mode, request.resources_id, request.config, metadata)
    return rollout["rollout_id"], True

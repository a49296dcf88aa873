"""Dispatch: every rollout entering the queue is announced on the tasks topic for runners to claim.

The store stays the only decider: a runner that receives a task claims it through the store, which
creates the attempt only if the rollout is still waiting. So a task delivered twice, or a rollout also
dequeued over REST, still yields exactly one attempt.
"""

from __future__ import annotations

from typing import Any

from agl_events.reducers import keys
from agl_events.store.commands.attempts import create_attempt, set_rollout_status
from agl_events.store.commands.workers import sync_worker_with_attempt
from agl_events.store.context import DecisionContext
from agl_events.types import QUEUING_STATUSES


def claim(ctx: DecisionContext, rid: str, worker_id: str | None
          ) -> tuple[dict[str, Any], dict[str, Any], int] | None:
    """Take a queued rollout for a runner: attempt k+1, rollout preparing; None if no longer waiting.

    Also returns the rollout's next span sequence id: while the runner holds the attempt, its tracer
    numbers the spans itself from there, with no call per span.
    """
    rollout = ctx.rollout(rid)
    if rollout is None or rollout["status"] not in QUEUING_STATUSES:
        return None
    attempt = create_attempt(ctx, rid, worker_id)
    set_rollout_status(ctx, rid, "preparing", "dequeue")
    if worker_id is not None:
        sync_worker_with_attempt(ctx, attempt, dequeue=True)
    return ctx.rollout(rid), attempt, (ctx.get(keys.span_counter(rid)) or 0) + 1  # type: ignore[return-value]

"""Dispatch: every rollout entering the queue is announced on the tasks topic for runners to claim.

The store stays the only decider: a runner that receives a task claims it through the store, which
creates the attempt only if the rollout is still waiting. So a task delivered twice, or a rollout also
dequeued over REST, still yields exactly one attempt.
"""

from __future__ import annotations

from agl_events.events.typed import SpanSequenceReserved
from agl_events.reducers import keys
from agl_events.store.commands.attempts import create_attempt, set_rollout_status
from agl_events.store.commands.workers import sync_worker_with_attempt
from agl_events.store.context import DecisionContext
from agl_events.types import QUEUING_STATUSES, AttemptedRollout, Claim

#: Span sequence ids a claim reserves for its attempt. The runner's tracer numbers spans from them itself
#: and asks the store for another block only when they run out, so a claimed attempt usually costs no call
#: for ids. Reserving them in the claim (not when the spans arrive) is what keeps a later attempt's ids apart
#: from this one's while this one's spans are still in a producer (a runner riding out a leader failover,
#: declared unresponsive and retried meanwhile). The price: the ids an attempt leaves unused are a gap
#: before the next attempt's.
CLAIM_SEQUENCE_BLOCK = 32


def claim(ctx: DecisionContext, rid: str, worker_id: str | None) -> Claim | None:
    """Take a queued rollout for a runner: attempt k+1; None if no longer waiting.

    A runner claims a task only to run it at once, so attempt and rollout start out `running` (the attempt
    with a heartbeat now) instead of `preparing` until the first span: the heartbeat that would otherwise
    switch them is an append per rollout saved, and the watchdog times both the same way.

    Also reserves the attempt's first `CLAIM_SEQUENCE_BLOCK` span sequence ids (its tracer numbers the spans
    itself from them, with no call per span) and says which resources to run with.
    """
    rollout = ctx.rollout(rid)
    if rollout is None or rollout["status"] not in QUEUING_STATUSES:
        return None
    attempt = create_attempt(ctx, rid, worker_id, running=True)
    set_rollout_status(ctx, rid, "running", "claim")
    if worker_id is not None:
        sync_worker_with_attempt(ctx, attempt, dequeue=True)
    base = ctx.get(keys.span_counter(rid)) or 0
    ctx.emit(SpanSequenceReserved(rollout_id=rid, attempt_id=attempt["attempt_id"],
                                  sequence_id=base + CLAIM_SEQUENCE_BLOCK))
    claimed = ctx.rollout(rid)
    assert claimed is not None
    return Claim(rollout=AttemptedRollout.model_validate({**claimed, "attempt": attempt}),
                 next_sequence_id=base + 1, reserved_through=base + CLAIM_SEQUENCE_BLOCK,
                 resources_id=claimed["resources_id"] or ctx.latest_resources_id())

"""Announcing a finished rollout on its span partition, for consumers that read spans only.

A trainer's samples are built from a rollout's spans once it has finished. Spans (6 partitions) and
rollouts (3) are not co-partitioned, so a span consumer cannot rely on the rollouts topic to know when a
trace is complete; `RolloutFinished` is appended to the rollout's span partition instead. The store
decides a finish only after its view has read the spans its runner reported (`finish_attempt` waits on
the tracer's offsets), so in that partition the record comes after them.
"""

from __future__ import annotations

from agl_events.events.typed import Attempt, Rollout, RolloutFinished
from agl_events.store.context import DecisionContext
from agl_events.types import FINISHED_STATUSES


def announce_finished(ctx: DecisionContext, rid: str, previous_status: str) -> None:
    """Emit RolloutFinished when the rollout (already updated in `ctx`) has just entered a final status."""
    rollout = ctx.rollout(rid)
    assert rollout is not None
    if rollout["status"] not in FINISHED_STATUSES or previous_status in FINISHED_STATUSES:
        return
    attempt = ctx.latest_attempt(rid)
    ctx.emit(RolloutFinished(rollout=Rollout.of(rollout), attempt=None if attempt is None else Attempt.of(attempt),
                             resources_generation=resources_generation(ctx, rollout["resources_id"])))


def resources_generation(ctx: DecisionContext, resources_id: str | None) -> int | None:
    """The rollout's resources generation (see `samples.generations`), among every snapshot in the view."""
    return None if resources_id is None else ctx.generations().get(resources_id)

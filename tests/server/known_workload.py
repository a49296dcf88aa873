"""A workload whose figures are known in advance, for the metrics and `/ui` tests.

Through the store's Python API on a fake clock: two resources versions; under the first, 3 rollouts succeed
with reward 0.2, under the second 3 with reward 0.8; 2 fail without a reward; 1 stays queued. Every rollout
is claimed 1.5 s (fake) after its enqueue and finishes 2 s after that.
"""

from __future__ import annotations

from typing import Any

from agl_events.store.service import EventSourcedStore
from tests.conftest import FakeClock
from tests.store import make_span, prompt

SUCCEEDED, FAILED, QUEUED = 6, 2, 1
REWARDS = {1: 0.2, 2: 0.8}  # generation -> reward of each rollout run with it
DISPATCH_SECONDS, RUN_SECONDS = 1.5, 2.0


def reward_attributes(value: float) -> dict[str, Any]:
    """The attributes of upstream's reward span (`emit_reward(value)`)."""
    return {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value}


async def _run_one(store: EventSourcedStore, clock: FakeClock, resources_id: str | None, reward: float | None,
                   status: str) -> None:
    rollout = await store.enqueue_rollout(input={"task": reward}, resources_id=resources_id)
    clock.advance(DISPATCH_SECONDS)
    claimed = await store.dequeue_rollout(worker_id="w-1")
    assert claimed is not None and claimed.rollout_id == rollout.rollout_id
    clock.advance(RUN_SECONDS)
    if reward is not None:
        span = make_span(rollout.rollout_id, claimed.attempt.attempt_id, 1, name="agentlightning.annotation")
        await store.add_span(span.model_copy(update={"attributes": reward_attributes(reward)}))
    await store.update_attempt(rollout.rollout_id, claimed.attempt.attempt_id, status=status)


async def run_known_workload(store: EventSourcedStore, clock: FakeClock) -> None:
    for generation, reward in REWARDS.items():
        version = await store.add_resources({"prompt": prompt(f"v{generation} {{name}}")})
        for _ in range(SUCCEEDED // len(REWARDS)):
            await _run_one(store, clock, version.resources_id, reward, "succeeded")
    for _ in range(FAILED):
        await _run_one(store, clock, None, None, "failed")
    await store.enqueue_rollout(input={"task": "left queued"})


"""The algorithm contract, and the context the Trainer hands an algorithm."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agl_events.adapter.base import TraceAdapter
from agl_events.emitter.reward import find_final_reward
from agl_events.store.service import EventSourcedStore
from agl_events.types import EnqueueRolloutRequest, Rollout, RolloutConfig


@dataclass
class SplitResult:
    """What a run over one dataset split produced."""

    mode: str
    rollouts: list[Rollout]
    rewards: list[float | None]
    attempts: list[int] = field(default_factory=list)
    adapted: list[Any] = field(default_factory=list)

    @property
    def succeeded(self) -> int:
        return sum(r.status == "succeeded" for r in self.rollouts)

    @property
    def retried(self) -> int:
        return sum(n > 1 for n in self.attempts)

    @property
    def mean_reward(self) -> float | None:
        known = [r for r in self.rewards if r is not None]
        return sum(known) / len(known) if known else None


@dataclass
class AlgorithmContext:
    """The store (in the Trainer's process), the adapter, and helpers every algorithm needs."""

    store: EventSourcedStore
    adapter: TraceAdapter[Any] | None = None
    rollout_config: RolloutConfig = field(default_factory=RolloutConfig)
    poll_interval: float = 1.0
    on_progress: Callable[[str, int, int], None] | None = None  # (mode, finished, total)

    async def run_split(self, dataset: Sequence[Any], mode: str, resources_id: str | None = None) -> SplitResult:
        """Enqueue one rollout per item, wait until all finished, read their spans back."""
        queued = await self.store.enqueue_many_rollouts([
            EnqueueRolloutRequest(input=item, mode=mode, resources_id=resources_id, config=self.rollout_config)
            for item in dataset])
        ids = [r.rollout_id for r in queued]
        finished = await self.wait_all(ids, mode)
        rewards, attempts, adapted = [], [], []
        for rollout in finished:
            spans = list(await self.store.query_spans(rollout.rollout_id, "latest"))
            rewards.append(find_final_reward(spans))  # spans come in sequence-id order
            attempts.append((await self.store.query_attempts(rollout.rollout_id)).total)
            if self.adapter is not None:  # a rollout without spans adapts to nothing, as upstream's daemon has it
                adapted.append(self.adapter(spans) if spans else [])
        return SplitResult(mode, finished, rewards, attempts, adapted)

    async def wait_all(self, rollout_ids: list[str], mode: str = "") -> list[Rollout]:
        """Wait for every rollout, in slices, so Ctrl-C and cancellation get through promptly."""
        done: dict[str, Rollout] = {}
        while len(done) < len(rollout_ids):
            pending = [rid for rid in rollout_ids if rid not in done]
            for rollout in await self.store.wait_for_rollouts(rollout_ids=pending, timeout=self.poll_interval):
                done[rollout.rollout_id] = rollout
            if self.on_progress is not None:
                self.on_progress(mode, len(done), len(rollout_ids))
            await asyncio.sleep(0)
        return [done[rid] for rid in rollout_ids]


class Algorithm(Protocol):
    """An algorithm runs inside `Trainer.fit`, with the runners already working on the task topic."""

    async def run(self, ctx: AlgorithmContext, train_dataset: Sequence[Any],
                  val_dataset: Sequence[Any] | None) -> dict[str, SplitResult]: ...

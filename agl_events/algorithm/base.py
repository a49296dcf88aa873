"""The algorithm contract, and the context the Trainer hands an algorithm.

Two ways to get training data, both here: `run_split` (enqueue a dataset, wait, read spans back: evaluation,
APO-style scoring) and `sample_stream` (batches from the samples topic, which the samples processor fills
as rollouts finish: GRPO-style training). `publish_resources` is how an algorithm hands runners a new
prompt or model version: rollouts enqueued after it name it, so runners run them with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agl_events.adapter.base import TraceAdapter
from agl_events.algorithm.metrics import TrainerMetrics
from agl_events.config import Settings
from agl_events.emitter.reward import find_final_reward
from agl_events.log.registry import codec_for
from agl_events.samples.batching import BatchPolicy
from agl_events.samples.generations import generation_of
from agl_events.samples.model import DATA_ID_KEY, GROUP_SIZE_KEY
from agl_events.samples.stream import SampleStream
from agl_events.store.service import EventSourcedStore
from agl_events.types import EnqueueRolloutRequest, NamedResources, ResourcesUpdate, Rollout, RolloutConfig

log = logging.getLogger(__name__)


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
    settings: Settings | None = None  # where the samples topic is (the Trainer's settings)
    #: The store's URL for other processes (runners, an LLM proxy the algorithm starts: `LLMProxy(models, url)`).
    store_url: str | None = None
    #: Called when an algorithm first asks for a sample stream: the Trainer starts its samples worker then.
    on_sample_stream: Callable[[], None] | None = None
    #: Counts the steps the sample streams hand out (the Trainer serves them on its store's /metrics and /ui).
    trainer_metrics: TrainerMetrics | None = None

    async def publish_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """A new resources version (a prompt template, a model version): the next generation, and the one
        `enqueue_groups` names from now on."""
        return await self.store.add_resources(resources)

    async def current_generation(self) -> int | None:
        """The generation of the latest resources (see `samples.generations`); None before any."""
        latest = await self.store.get_latest_resources()
        if latest is None:
            return None
        every = await self.store.query_resources()
        return generation_of(latest.resources_id, ((r.create_time, r.resources_id) for r in every))

    async def enqueue_groups(self, dataset: Sequence[Any], group_size: int, mode: str = "train",
                             resources_id: str | None = None, data_ids: Sequence[str] | None = None
                             ) -> list[Rollout]:
        """`group_size` rollouts per item, under the latest resources unless told; each rollout's metadata
        carries its task's data id and the group size, so its samples form one complete group (GRPO)."""
        if resources_id is None:
            latest = await self.store.get_latest_resources()
            resources_id = latest.resources_id if latest is not None else None
        ids = list(data_ids) if data_ids is not None else [str(i) for i in range(len(dataset))]
        requests = [EnqueueRolloutRequest(input=item, mode=mode, resources_id=resources_id, config=self.rollout_config,
                                          metadata={DATA_ID_KEY: data_id, GROUP_SIZE_KEY: group_size})
                    for item, data_id in zip(dataset, ids, strict=True) for _ in range(group_size)]
        return list(await self.store.enqueue_many_rollouts(requests))

    def sample_stream(self, policy: BatchPolicy | None = None, *, group: str | None = None,
                      recorded: bool = False) -> SampleStream:
        """Batches from the samples topic, staleness judged against the latest resources generation
        (`recorded`: steps committed through `samples.step_log`, see `SampleStream`)."""
        if self.settings is None:
            raise RuntimeError("sample_stream needs the context's settings (the Trainer sets them)")
        if self.on_sample_stream is not None:
            self.on_sample_stream()
        return SampleStream(self.settings.bootstrap_servers, self.settings.experiment,
                            codec_for(self.settings.schema_registry_url), policy, group=group,
                            current_generation=self.current_generation, recorded=recorded,
                            on_batch=None if self.trainer_metrics is None else self.trainer_metrics.observe_batch)

    async def run_split(self, dataset: Sequence[Any], mode: str, resources_id: str | None = None,
                        timeout: float | None = None) -> SplitResult:
        """Enqueue one rollout per item, wait until all finished (or `timeout` seconds: then the split holds
        those that did), read their spans back."""
        queued = await self.store.enqueue_many_rollouts([
            EnqueueRolloutRequest(input=item, mode=mode, resources_id=resources_id, config=self.rollout_config)
            for item in dataset])
        ids = [r.rollout_id for r in queued]
        finished = await self.wait_all(ids, mode, timeout)
        rewards, attempts, adapted = [], [], []
        for rollout in finished:
            spans = list(await self.store.query_spans(rollout.rollout_id, "latest"))
            rewards.append(find_final_reward(spans))  # spans come in sequence-id order
            attempts.append((await self.store.query_attempts(rollout.rollout_id)).total)
            if self.adapter is not None:  # a rollout without spans adapts to nothing, as upstream's daemon has it
                adapted.append(self.adapter(spans) if spans else [])
        return SplitResult(mode, finished, rewards, attempts, adapted)

    async def wait_all(self, rollout_ids: list[str], mode: str = "", timeout: float | None = None
                       ) -> list[Rollout]:
        """Wait for every rollout, in slices, so Ctrl-C and cancellation get through promptly; after `timeout`
        seconds, those finished by then (in the order asked)."""
        done: dict[str, Rollout] = {}
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(done) < len(rollout_ids):
            if deadline is not None and time.monotonic() >= deadline:
                log.warning("%s: %d of %d rollouts unfinished after %.0f s", mode or "wait",
                            len(rollout_ids) - len(done), len(rollout_ids), timeout)
                break
            pending = [rid for rid in rollout_ids if rid not in done]
            for rollout in await self.store.wait_for_rollouts(rollout_ids=pending, timeout=self.poll_interval):
                done[rollout.rollout_id] = rollout
            if self.on_progress is not None:
                self.on_progress(mode, len(done), len(rollout_ids))
            await asyncio.sleep(0)
        return [done[rid] for rid in rollout_ids if rid in done]


class Algorithm(Protocol):
    """An algorithm runs inside `Trainer.fit`, with the runners already working on the task topic."""

    async def run(self, ctx: AlgorithmContext, train_dataset: Sequence[Any],
                  val_dataset: Sequence[Any] | None) -> dict[str, SplitResult]: ...

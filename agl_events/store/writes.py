"""The store's writes: commands decided here, through the committer, for rollouts this store owns.

Each method decides one command (`store.commands`) and returns its answer once the events are durable and
in the view. Where a store group is involved, `store.routed` calls these for the rollouts owned here and
forwards the rest. A finish first waits for the view to hold the attempt's spans (`folds`), so whoever waits
for the rollout reads all of them. A read-only store passes a `decider` and `folds` that refuse (`Refusal`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, TypeAdapter

from agl_events.events.task_request import TaskRequest
from agl_events.log.backpressure import BackpressureStats
from agl_events.store.commands import attempts as attempt_cmds
from agl_events.store.commands import candidates as candidate_cmds
from agl_events.store.commands import dispatch as dispatch_cmds
from agl_events.store.commands import ingest as ingest_cmds
from agl_events.store.commands import resources as resource_cmds
from agl_events.store.commands import rollouts as rollout_cmds
from agl_events.store.commands import spans as span_cmds
from agl_events.store.commands import tasks as task_cmds
from agl_events.store.commands import workers as worker_cmds
from agl_events.store.context import DecisionContext
from agl_events.store.errors import NotOwnerError, ReadOnlyStoreError, StoreUnhealthyError
from agl_events.store.routing import owned
from agl_events.topics import Topic
from agl_events.types import (
    UNSET,
    Attempt,
    AttemptedRollout,
    AttemptFinish,
    Claim,
    EnqueueRolloutRequest,
    FinishOutcome,
    NamedResources,
    PromptCandidateStep,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Worker,
)

T = TypeVar("T")


class Decider(Protocol):
    """Decides commands in turn and answers once their events are durable (the `Committer`)."""

    async def run(self, command: Callable[[DecisionContext], T]) -> T: ...

    async def drain(self) -> None: ...

    async def close(self) -> None: ...


class FoldWaiter(Protocol):
    """Waits until the view holds a topic up to given offsets, or up to its end (the `Follower`)."""

    async def wait_folded(self, topic: Topic, ends: Mapping[int, int] | None = None) -> None: ...


class Refusal:
    """The decider and fold waiter of a store that writes nothing: every write is a ReadOnlyStoreError."""

    def __init__(self, why: str) -> None:
        self.why = why

    async def run(self, command: Callable[[DecisionContext], T]) -> T:
        raise ReadOnlyStoreError(self.why)

    async def wait_folded(self, topic: Topic, ends: Mapping[int, int] | None = None) -> None:
        raise ReadOnlyStoreError(self.why)

    async def drain(self) -> None:
        """Nothing was decided."""

    async def close(self) -> None:
        """Nothing to stop."""


class Writes:
    """Local decisions. `serving()` raises once the store stopped serving; `queues()` reports back-pressure;
    `release()` closes the log once the decider stopped."""

    def __init__(self, decider: Decider, folds: FoldWaiter, serving: Callable[[], None],
                 queues: Callable[[], dict[str, BackpressureStats]] = dict,
                 release: Callable[[], None] = lambda: None) -> None:
        self._decider = decider
        self.folds = folds
        self._serving = serving
        self._queues = queues
        self._release = release

    async def decide(self, command: Callable[[DecisionContext], T]) -> T:
        self._serving()
        return await self._decider.run(command)

    def backpressure(self) -> dict[str, BackpressureStats]:
        return self._queues()

    async def drain(self) -> None:
        await self._decider.drain()

    async def close(self) -> None:
        await self._decider.close()
        await asyncio.to_thread(self._release)

    # -- rollouts -----------------------------------------------------------------------------------------
    async def start_rollout(self, input: Any, mode: Any, resources_id: str | None, config: RolloutConfig | None,
                            metadata: dict[str, Any] | None, worker_id: str | None) -> AttemptedRollout:
        rollout, attempt = await self.decide(lambda ctx: rollout_cmds.start_rollout(
            ctx, input, mode, resources_id, config, metadata, worker_id))
        return AttemptedRollout.model_validate({**rollout, "attempt": attempt})

    async def enqueue_many(self, requests: Sequence[EnqueueRolloutRequest]) -> list[Rollout]:
        def enqueue_all(ctx: DecisionContext) -> list[dict[str, Any]]:
            latest = ctx.latest_resources_id()  # resolved once per batch, as upstream
            return [rollout_cmds.enqueue_rollout(ctx, r.input, r.mode, r.resources_id or latest, r.config,
                                                 r.metadata) for r in requests]

        return [Rollout.model_validate(r) for r in await self.decide(enqueue_all)]

    async def enqueue_rollout(self, input: Any, mode: Any, resources_id: str | None, config: RolloutConfig | None,
                              metadata: dict[str, Any] | None) -> Rollout:
        return Rollout.model_validate(await self.decide(lambda ctx: rollout_cmds.enqueue_rollout(
            ctx, input, mode, resources_id, config, metadata)))

    async def dequeue(self, limit: int, worker_id: str | None) -> list[AttemptedRollout]:
        claimed = await self.decide(lambda ctx: rollout_cmds.dequeue_rollouts(ctx, limit, worker_id))
        return [AttemptedRollout.model_validate({**rollout, "attempt": attempt}) for rollout, attempt in claimed]

    async def announce_queued(self) -> int:
        """Dispatch every queued rollout owned here to the runners again (after a start or a take-over)."""
        return int(await self.decide(dispatch_cmds.announce_queued))

    async def update_rollout(self, rollout_id: str, **given: Any) -> Rollout:
        return Rollout.model_validate(await self.decide(owned(rollout_id, lambda ctx: rollout_cmds.update_rollout(
            ctx, rollout_id, **given))))

    async def ingest_task(self, key: str, request: TaskRequest) -> tuple[str, bool]:
        return await self.decide(lambda ctx: ingest_cmds.ingest_task(ctx, key, request))

    # -- attempts -----------------------------------------------------------------------------------------
    async def start_attempt(self, rollout_id: str, worker_id: str | None) -> AttemptedRollout:
        rollout, attempt = await self.decide(owned(rollout_id, lambda ctx: rollout_cmds.start_attempt(
            ctx, rollout_id, worker_id)))
        return AttemptedRollout.model_validate({**rollout, "attempt": attempt})

    async def claim(self, rollout_ids: Sequence[str], worker_id: str | None) -> list[Claim | None]:
        return await self.decide(owned(rollout_ids, lambda ctx: [task_cmds.claim(ctx, rid, worker_id)
                                                                  for rid in rollout_ids]))

    async def update_attempt(self, rollout_id: str, attempt_id: str, **given: Any) -> Attempt:
        """A runner writes its spans to the log before it reports the attempt finished; fold them first, so
        whoever waits for the rollout reads all its spans (`finish` says how far they go)."""
        if given.get("status", UNSET) in ("succeeded", "failed"):
            await self.folds.wait_folded(Topic.SPANS)
        return await self._update_attempt(rollout_id, attempt_id, **given)

    async def _update_attempt(self, rollout_id: str, attempt_id: str, **given: Any) -> Attempt:
        return Attempt.model_validate(await self.decide(owned(rollout_id, lambda ctx: attempt_cmds.update_attempt(
            ctx, rollout_id, attempt_id, **given))))

    async def finish(self, finishes: Sequence[AttemptFinish]) -> list[FinishOutcome]:
        """The view folds to the furthest offsets any finish names (to the span topic's ends if one names none:
        a proxied attempt's), then each is decided as its own command (an unknown attempt fails alone, its
        error in its outcome); they share the committer's batch."""
        through: dict[int, int] | None = {}
        for finish in finishes:
            if finish.spans_through is None or through is None:
                through = None
                continue
            for partition, end in finish.spans_through.items():
                through[partition] = max(end, through.get(partition, 0))
        await self.folds.wait_folded(Topic.SPANS, through)
        decided = await asyncio.gather(*(self._update_attempt(f.rollout_id, f.attempt_id, status=f.status)
                                         for f in finishes), return_exceptions=True)
        outcomes = []
        for result in decided:
            if isinstance(result, StoreUnhealthyError | NotOwnerError):
                raise result
            if isinstance(result, BaseException):
                outcomes.append(FinishOutcome(error=f"{type(result).__name__}: {result}"))
            else:
                outcomes.append(FinishOutcome(attempt=result))
        return outcomes

    async def finish_one(self, rollout_id: str, attempt_id: str, status: str, spans_through: Mapping[int, int]
                         ) -> Attempt:
        await self.folds.wait_folded(Topic.SPANS, spans_through)
        return await self._update_attempt(rollout_id, attempt_id, status=status)

    # -- spans --------------------------------------------------------------------------------------------
    async def add_spans(self, dumped: list[dict[str, Any]]) -> list[bool]:
        """Whether each span (JSON-ready) was inserted (False: a duplicate)."""
        inserted = await self.decide(owned([s["rollout_id"] for s in dumped],
                                           lambda ctx: span_cmds.add_spans(ctx, dumped)))
        return [j in set(inserted) for j in range(len(dumped))]

    def sequence_ids(self, pairs: list[tuple[str, str]]) -> Awaitable[list[int]]:
        return self.decide(owned([rid for rid, _ in pairs], lambda ctx: span_cmds.allocate_sequence_ids(ctx, pairs)))

    # -- resources, prompt candidates, workers --------------------------------------------------------------
    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        dumped = _dump_resources(resources)
        return ResourcesUpdate.model_validate(
            await self.decide(lambda ctx: resource_cmds.add_resources(ctx, dumped)))

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        dumped = _dump_resources(resources)
        return ResourcesUpdate.model_validate(
            await self.decide(lambda ctx: resource_cmds.update_resources(ctx, resources_id, dumped)))

    async def record_prompt_candidate(self, step: PromptCandidateStep) -> None:
        record = step.model_dump()
        await self.decide(lambda ctx: candidate_cmds.record_prompt_candidate(ctx, record))

    async def update_worker(self, worker_id: str, heartbeat_stats: Any) -> Worker:
        if heartbeat_stats is None:
            raise TypeError("heartbeat_stats must be a mapping, not None")
        return Worker.model_validate(
            await self.decide(lambda ctx: worker_cmds.update_worker(ctx, worker_id, heartbeat_stats)))


_NAMED_RESOURCES = TypeAdapter(NamedResources)


def _dump_resources(resources: NamedResources | dict[str, Any]) -> dict[str, Any]:
    """Validate NamedResources (models or plain dicts) into JSON-ready dicts."""
    plain = {k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in resources.items()}
    return _NAMED_RESOURCES.dump_python(_NAMED_RESOURCES.validate_python(plain), mode="json")

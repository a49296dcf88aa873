"""The event-sourced LightningStore: the facade over the store's parts (`store.parts`), one contract method each.

The watchdog runs in its own loop, and before the calls upstream marks `@healthcheck_before` (`_watched`
here, the one place that calls its hook): a caller then reads what a scan at that moment decides, which the
contract tests (fake clock, debounce 0) rely on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from agl_events.events.task_request import TaskRequest
from agl_events.log.backpressure import BackpressureStats
from agl_events.log.records import LoggedEvent
from agl_events.store.backend import Backend
from agl_events.store.contract import LightningStore, LightningStoreCapabilities
from agl_events.store.parts import StoreParts
from agl_events.types import (
    UNSET,
    Attempt,
    AttemptedRollout,
    AttemptFinish,
    Claim,
    EnqueueRolloutRequest,
    FinishOutcome,
    NamedResources,
    PaginatedResult,
    PromptCandidate,
    PromptCandidateStep,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Span,
    Worker,
)
from agl_events.views.store_view import StoreView

P = ParamSpec("P")
R = TypeVar("R")


def _watched(method: Callable[Concatenate[EventSourcedStore, P], Awaitable[R]]
             ) -> Callable[Concatenate[EventSourcedStore, P], Awaitable[R]]:
    """Upstream's `@healthcheck_before`: the watchdog's hook (at most one scan per debounce period) first."""
    @functools.wraps(method)
    async def watched(self: EventSourcedStore, *args: P.args, **kwargs: P.kwargs) -> R:
        await self._parts.before_call()
        return await method(self, *args, **kwargs)

    return watched


class EventSourcedStore(LightningStore):
    """Agent Lightning 0.3.0's LightningStore semantics over an event log and a folded view. Background work
    (follower, watchdog) runs from `start()`, or from the first call for stores built outside an event loop."""

    def __init__(self, backend: Backend, *, scan_debounce_seconds: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._parts = StoreParts(self, backend, scan_debounce_seconds=scan_debounce_seconds, clock=clock)
        self._reads, self._writes, self._routed = self._parts.reads, self._parts.writes, self._parts.routed
        #: This store's part in a store group (what the group's membership calls when partitions move).
        self.group = self._parts.group

    async def start(self) -> int:
        return await self._parts.start()

    def interrupt_waits(self) -> None:
        self._parts.interrupt_waits()

    async def close(self) -> None:
        await self._parts.close()

    @property
    def closed(self) -> bool:
        return self._parts.closed

    # -- what the server observes ------------------------------------------------------------------------------
    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return self._parts.backend.capabilities

    @property
    def failure(self) -> BaseException | None:
        return self._parts.failure

    def add_failure_listener(self, listener: Callable[[BaseException], None]) -> None:
        self._parts.failure_listeners.append(listener)

    def add_fold_listener(self, listener: Callable[[list[LoggedEvent]], None]) -> None:
        self._parts.fold_listeners.append(listener)

    @property
    def view(self) -> StoreView:
        return self._parts.backend.view

    @property
    def view_dir(self) -> Path | None:
        return self._parts.backend.view_dir

    @property
    def dead_letters_written(self) -> int | None:
        return None if self._parts.backend.dead_letters is None else self._parts.backend.dead_letters()

    def log_ends(self) -> dict[tuple[str, int], int]:
        return self._parts.backend.log_ends()

    def rollouts_by_status(self) -> dict[str, int]:
        return self._parts.backend.status_counts()

    def backpressure(self) -> dict[str, BackpressureStats]:
        return self._writes.backpressure()

    async def statistics(self) -> dict[str, Any]:
        return await self._parts.statistics(type(self).__name__)

    # -- commands ----------------------------------------------------------------------------------------------
    @_watched
    async def start_rollout(self, input: Any, mode: Any = None, resources_id: str | None = None,
                            config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None,
                            worker_id: str | None = None) -> AttemptedRollout:
        return await self._routed.start_rollout(input, mode, resources_id, config, metadata, worker_id)

    @_watched
    async def enqueue_rollout(self, input: Any, mode: Any = None, resources_id: str | None = None,
                              config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None
                              ) -> Rollout:
        return await self._routed.enqueue_rollout(input, mode, resources_id, config, metadata)

    @_watched
    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        return await self._routed.enqueue_many(rollouts)

    @_watched
    async def dequeue_many_rollouts(self, *, limit: int = 1, worker_id: str | None = None
                                    ) -> Sequence[AttemptedRollout]:
        return [] if limit <= 0 else await self._routed.dequeue(limit, worker_id)

    @_watched
    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout:
        return await self._routed.start_attempt(rollout_id, worker_id)

    @_watched
    async def update_rollout(self, rollout_id: str, input: Any = UNSET, mode: Any = UNSET, resources_id: Any = UNSET,
                             status: Any = UNSET, config: Any = UNSET, metadata: Any = UNSET) -> Rollout:
        return await self._routed.update_rollout(rollout_id, dict(
            input=input, mode=mode, resources_id=resources_id, status=status, config=config, metadata=metadata))

    @_watched
    async def update_attempt(self, rollout_id: str, attempt_id: str, status: Any = UNSET, worker_id: Any = UNSET,
                             last_heartbeat_time: Any = UNSET, metadata: Any = UNSET) -> Attempt:
        return await self._routed.update_attempt(rollout_id, attempt_id, dict(
            status=status, worker_id=worker_id, last_heartbeat_time=last_heartbeat_time, metadata=metadata))

    @_watched
    async def claim_rollouts(self, rollout_ids: Sequence[str], worker_id: str | None = None) -> list[Claim | None]:
        return await self._routed.claim(rollout_ids, worker_id)

    @_watched
    async def finish_attempt(self, rollout_id: str, attempt_id: str, status: Literal["succeeded", "failed"],
                             spans_through: Mapping[int, int]) -> Attempt:
        return await self._routed.finish_attempt(rollout_id, attempt_id, status, spans_through)

    @_watched
    async def finish_attempts(self, finishes: Sequence[AttemptFinish]) -> list[FinishOutcome]:
        return await self._routed.finish(finishes)

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        return await self._routed.add_spans(spans)

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        return await self._routed.sequence_ids([(rid, aid) for rid, aid in rollout_attempt_ids])

    async def ingest_task(self, key: str, request: TaskRequest) -> tuple[str, bool]:
        return await self._routed.ingest_task(key, request)

    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        return await self._writes.add_resources(resources)

    @_watched
    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        return await self._writes.update_resources(resources_id, resources)

    async def record_prompt_candidate(self, step: PromptCandidateStep) -> None:
        await self._writes.record_prompt_candidate(step)

    async def update_worker(self, worker_id: str, heartbeat_stats: Any = UNSET) -> Worker:
        return await self._writes.update_worker(worker_id, heartbeat_stats)

    @_watched
    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: float | None = None) -> list[Rollout]:
        self._parts.check_serving()  # again: the store may have failed during the scan, and no one would wake us
        frozen = self._parts.backend.follower is None  # nothing will finish in a view that does not move
        return await self._parts.routed_reads.wait_for_rollouts(rollout_ids, 0 if frozen else timeout)

    # -- reads -------------------------------------------------------------------------------------------------
    @_watched
    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        return await self._parts.routed_reads.get_rollout_by_id(rollout_id)

    @_watched
    async def query_rollouts(self, *, status_in: Sequence[str] | None = None, filter_logic: str = "and",
                             rollout_id_in: Sequence[str] | None = None, rollout_id_contains: str | None = None,
                             sort_by: str | None = None, sort_order: str = "asc", limit: int = -1, offset: int = 0,
                             status: Sequence[str] | None = None, rollout_ids: Sequence[str] | None = None
                             ) -> PaginatedResult[Rollout | AttemptedRollout]:
        return await self._parts.routed_reads.query_rollouts(
            status_in=status_in, rollout_id_in=rollout_id_in, rollout_id_contains=rollout_id_contains,
            filter_logic=filter_logic, sort_by=sort_by, sort_order=sort_order, limit=limit, offset=offset,
            status=status, rollout_ids=rollout_ids)

    @_watched
    async def query_attempts(self, rollout_id: str, *, sort_by: str | None = "sequence_id", sort_order: str = "asc",
                             limit: int = -1, offset: int = 0) -> PaginatedResult[Attempt]:
        return await self._parts.routed_reads.query_attempts(rollout_id, sort_by=sort_by, sort_order=sort_order,
                                                       limit=limit, offset=offset)

    @_watched
    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        return await self._parts.routed_reads.get_latest_attempt(rollout_id)

    @_watched
    async def query_spans(self, rollout_id: str, attempt_id: str | None = None, *, trace_id: str | None = None,
                          trace_id_contains: str | None = None, span_id: str | None = None,
                          span_id_contains: str | None = None, parent_id: str | None = None,
                          parent_id_contains: str | None = None, name: str | None = None,
                          name_contains: str | None = None, filter_logic: Literal["and", "or"] = "and",
                          limit: int = -1, offset: int = 0, sort_by: str | None = "sequence_id",
                          sort_order: str = "asc") -> PaginatedResult[Span]:
        return await self._parts.routed_reads.query_spans(
            rollout_id, attempt_id,
            equal={"trace_id": trace_id, "span_id": span_id, "parent_id": parent_id, "name": name},
            containing={"trace_id": trace_id_contains, "span_id": span_id_contains,
                        "parent_id": parent_id_contains, "name": name_contains},
            filter_logic=filter_logic, limit=limit, offset=offset, sort_by=sort_by, sort_order=sort_order)

    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:
        return self._reads.get_resources_by_id(resources_id)

    async def get_latest_resources(self) -> ResourcesUpdate | None:
        return self._reads.get_latest_resources()

    async def query_resources(self, *, resources_id: str | None = None, resources_id_contains: str | None = None,
                              sort_by: str | None = None, sort_order: str = "asc", limit: int = -1,
                              offset: int = 0) -> PaginatedResult[ResourcesUpdate]:
        return self._reads.query_resources(resources_id=resources_id, resources_id_contains=resources_id_contains,
                                           sort_by=sort_by, sort_order=sort_order, limit=limit, offset=offset)

    async def query_prompt_candidates(self, run_id: str | None = None) -> list[PromptCandidate]:
        return self._reads.query_prompt_candidates(run_id)

    async def task_rollouts(self, keys: Sequence[str]) -> dict[str, str]:
        return await self._parts.routed_reads.task_rollouts(keys)

    async def get_worker_by_id(self, worker_id: str) -> Worker | None:
        return self._reads.get_worker_by_id(worker_id)

    @_watched
    async def query_workers(self, *, status_in: Sequence[str] | None = None, worker_id_contains: str | None = None,
                            filter_logic: str = "and", sort_by: str | None = None, sort_order: str = "asc",
                            limit: int = -1, offset: int = 0) -> PaginatedResult[Worker]:
        return self._reads.query_workers(status_in=status_in, worker_id_contains=worker_id_contains,
                                         filter_logic=filter_logic, sort_by=sort_by, sort_order=sort_order,
                                         limit=limit, offset=offset)

"""The store contract: Agent Lightning 0.3.0's LightningStore, method for method.

Backends differ only in where the log and the views live; the REST server wraps any of them.
Behaviour (status machines, retries, sequence ids, errors) is specified in
`docs/agl-store-contract.md` of the shared docs and implemented once in `agl_events.store.service`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypedDict

from agl_events.types import (
    Attempt,
    AttemptedRollout,
    AttemptStatus,
    EnqueueRolloutRequest,
    NamedResources,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    RolloutMode,
    RolloutStatus,
    Span,
    Worker,
    WorkerStatus,
)


class _UnsetType:
    """Marks "argument not given" in update methods, where None is a value. Picklable singleton."""

    _instance: _UnsetType | None = None

    def __new__(cls) -> _UnsetType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _UnsetType()
Unset = _UnsetType

SortOrder = Literal["asc", "desc"]
FilterLogic = Literal["and", "or"]


class LightningStoreCapabilities(TypedDict, total=False):
    thread_safe: bool
    async_safe: bool
    zero_copy: bool
    otlp_traces: bool


class LightningStore(Protocol):
    """What every store backend (and the REST client) offers. All methods are coroutines except two."""

    @property
    def capabilities(self) -> LightningStoreCapabilities: ...

    async def statistics(self) -> dict[str, Any]: ...

    async def start_rollout(self, input: Any, mode: RolloutMode | None = None, resources_id: str | None = None,
                            config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None,
                            worker_id: str | None = None) -> AttemptedRollout: ...

    async def enqueue_rollout(self, input: Any, mode: RolloutMode | None = None, resources_id: str | None = None,
                              config: RolloutConfig | None = None,
                              metadata: dict[str, Any] | None = None) -> Rollout: ...

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]: ...

    async def dequeue_rollout(self, worker_id: str | None = None) -> AttemptedRollout | None: ...

    async def dequeue_many_rollouts(self, *, limit: int = 1,
                                    worker_id: str | None = None) -> Sequence[AttemptedRollout]: ...

    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout: ...

    async def add_span(self, span: Span) -> Span | None: ...

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]: ...

    async def query_rollouts(self, *, status_in: Sequence[RolloutStatus] | None = None,
                             rollout_id_in: Sequence[str] | None = None, rollout_id_contains: str | None = None,
                             filter_logic: FilterLogic = "and", sort_by: str | None = None,
                             sort_order: SortOrder = "asc", limit: int = -1, offset: int = 0,
                             status: Sequence[RolloutStatus] | None = None,
                             rollout_ids: Sequence[str] | None = None,
                             ) -> PaginatedResult[Rollout | AttemptedRollout]: ...

    async def query_attempts(self, rollout_id: str, *, sort_by: str | None = "sequence_id",
                             sort_order: SortOrder = "asc", limit: int = -1,
                             offset: int = 0) -> PaginatedResult[Attempt]: ...

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None: ...

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None: ...

    async def query_resources(self, *, resources_id: str | None = None, resources_id_contains: str | None = None,
                              sort_by: str | None = None, sort_order: SortOrder = "asc", limit: int = -1,
                              offset: int = 0) -> PaginatedResult[ResourcesUpdate]: ...

    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate: ...

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate: ...

    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None: ...

    async def get_latest_resources(self) -> ResourcesUpdate | None: ...

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int: ...

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]: ...

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: float | None = None) -> list[Rollout]: ...

    async def query_spans(self, rollout_id: str, attempt_id: str | Literal["latest"] | None = None, *,
                          trace_id: str | None = None, trace_id_contains: str | None = None,
                          span_id: str | None = None, span_id_contains: str | None = None,
                          parent_id: str | None = None, parent_id_contains: str | None = None,
                          name: str | None = None, name_contains: str | None = None,
                          filter_logic: FilterLogic = "and", limit: int = -1, offset: int = 0,
                          sort_by: str | None = "sequence_id",
                          sort_order: SortOrder = "asc") -> PaginatedResult[Span]: ...

    async def update_rollout(self, rollout_id: str, input: Any = UNSET, mode: Any = UNSET,
                             resources_id: Any = UNSET, status: Any = UNSET, config: Any = UNSET,
                             metadata: Any = UNSET) -> Rollout: ...

    async def update_attempt(self, rollout_id: str, attempt_id: str | Literal["latest"], status: Any = UNSET,
                             worker_id: Any = UNSET, last_heartbeat_time: Any = UNSET,
                             metadata: Any = UNSET) -> Attempt: ...

    async def query_workers(self, *, status_in: Sequence[WorkerStatus] | None = None,
                            worker_id_contains: str | None = None, filter_logic: FilterLogic = "and",
                            sort_by: str | None = None, sort_order: SortOrder = "asc", limit: int = -1,
                            offset: int = 0) -> PaginatedResult[Worker]: ...

    async def get_worker_by_id(self, worker_id: str) -> Worker | None: ...

    async def update_worker(self, worker_id: str, heartbeat_stats: Any = UNSET) -> Worker: ...


__all__ = ["UNSET", "AttemptStatus", "LightningStore", "LightningStoreCapabilities", "Unset"]

"""Request bodies and query models of the `/v1/agl` REST API, field for field as Agent Lightning 0.3.0 sends them.

They mirror `agentlightning.store.client_server` so that the unchanged upstream `LightningStoreClient` talks to us.
Two deliberate differences, both so that bad input gets a 400 with a clear message instead of a 422:
`sort_order` and `filter_logic` are plain strings checked by `validate_pagination` (upstream types them as
Literals, which FastAPI turns into 422s).
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import BaseModel, Field, model_validator

from agl_events.types import (
    AttemptedRollout,
    AttemptFinish,
    AttemptStatus,
    EnqueueRolloutRequest,
    Rollout,
    RolloutConfig,
    RolloutMode,
    RolloutStatus,
    SpansThrough,
    WorkerStatus,
)


class RolloutRequest(BaseModel):
    """POST /rollouts: start a rollout with its first attempt, bypassing the queue."""

    input: Any
    mode: RolloutMode | None = None
    resources_id: str | None = None
    config: RolloutConfig | None = None
    metadata: dict[str, Any] | None = None
    worker_id: str | None = None


class EnqueueManyRolloutsRequest(BaseModel):
    """POST /queues/rollouts/enqueue. The client always wraps even a single rollout in this list."""

    rollouts: list[EnqueueRolloutRequest]


class DequeueManyRolloutsRequest(BaseModel):
    """POST /queues/rollouts/dequeue; the body may also be absent (then limit=1, no worker)."""

    limit: int = 1
    worker_id: str | None = None


class StartAttemptRequest(BaseModel):
    """POST /rollouts/{id}/attempts; the client sends no body at all when there is no worker id."""

    worker_id: str | None = None


class PaginatedQuery(BaseModel):
    """Fields every list route shares; checked by `validate_pagination` so a bad value is a 400."""

    limit: int = -1
    offset: int = 0
    sort_by: str | None = None
    sort_order: str = "asc"

    @property
    def order(self) -> Literal["asc", "desc"]:
        """`sort_order` typed for the store; only meaningful after `validate_pagination` accepted it."""
        return cast(Literal["asc", "desc"], self.sort_order)


class FilteredQuery(PaginatedQuery):
    """List routes whose filters combine by `filter_logic` (and|or)."""

    filter_logic: str = "and"

    @property
    def logic(self) -> Literal["and", "or"]:
        """`filter_logic` typed for the store; only meaningful after `validate_pagination` accepted it."""
        return cast(Literal["and", "or"], self.filter_logic)


class QueryRolloutsRequest(FilteredQuery):
    status_in: list[RolloutStatus] | None = None
    rollout_id_in: list[str] | None = None
    rollout_id_contains: str | None = None


class QueryAttemptsRequest(PaginatedQuery):
    sort_by: str | None = "sequence_id"


class QueryResourcesRequest(PaginatedQuery):
    # No filter_logic: upstream ANDs the exact and contains filters on resources_id.
    resources_id: str | None = None
    resources_id_contains: str | None = None


class QueryWorkersRequest(FilteredQuery):
    status_in: list[WorkerStatus] | None = None
    worker_id_contains: str | None = None


class QuerySpansRequest(FilteredQuery):
    rollout_id: str
    attempt_id: str | None = None
    trace_id: str | None = None
    trace_id_contains: str | None = None
    span_id: str | None = None
    span_id_contains: str | None = None
    parent_id: str | None = None
    parent_id_contains: str | None = None
    name: str | None = None
    name_contains: str | None = None
    sort_by: str | None = "sequence_id"


class FindTaskRequestsRequest(BaseModel):
    """agl-events extension: which of these task-request idempotency keys became rollouts."""

    keys: list[str]


class UpdateRolloutRequest(BaseModel):
    """Only the keys present in the JSON are applied (`model_fields_set`); absent ones stay UNSET."""

    input: Any = None
    mode: RolloutMode | None = None
    resources_id: str | None = None
    status: RolloutStatus | None = None
    config: RolloutConfig | None = None
    metadata: dict[str, Any] | None = None


class UpdateAttemptRequest(BaseModel):
    """Only the keys present are applied; an explicit null for any of them is a 400."""

    status: AttemptStatus | None = None
    worker_id: str | None = None
    last_heartbeat_time: float | None = None
    metadata: dict[str, Any] | None = None


class UpdateWorkerRequest(BaseModel):
    heartbeat_stats: dict[str, Any] | None = None


class NextSequenceIdRequest(BaseModel):
    rollout_id: str
    attempt_id: str
    #: agl-events extension: reserve this many consecutive ids and answer the first (a runner's tracer that used
    #: up its claim's block); Agent Lightning's clients leave it out: one id.
    count: int = Field(default=1, ge=1, le=65536)
    #: agl-events extension: refuse (400) unless the attempt exists; the LLM proxy's first call of an attempt
    #: checks the attempt and takes its id in one round trip.
    check_attempt: bool = False


class NextSequenceIdResponse(BaseModel):
    sequence_id: int


class HealthStatus(BaseModel):
    """GET /v1/agl/health: `ok`, or `unhealthy` (503) with why the store stopped serving."""

    status: Literal["ok", "unhealthy"]
    detail: str | None = None


class WaitForRolloutsRequest(BaseModel):
    rollout_ids: list[str]
    timeout: float | None = None


__all__ = [
    "DequeueManyRolloutsRequest",
    "EnqueueManyRolloutsRequest",
    "FilteredQuery",
    "HealthStatus",
    "NextSequenceIdRequest",
    "NextSequenceIdResponse",
    "PaginatedQuery",
    "QueryAttemptsRequest",
    "QueryResourcesRequest",
    "QueryRolloutsRequest",
    "QuerySpansRequest",
    "QueryWorkersRequest",
    "RolloutRequest",
    "StartAttemptRequest",
    "UpdateAttemptRequest",
    "UpdateRolloutRequest",
    "UpdateWorkerRequest",
    "WaitForRolloutsRequest",
]


class ClaimResponse(BaseModel):
    """agl-events extension: a runner's claim of a dispatched task (null rollout: someone else has it)."""

    rollout: AttemptedRollout | None
    next_sequence_id: int | None
    reserved_through: int | None = None
    resources_id: str | None = None


class ClaimManyRequest(BaseModel):
    """agl-events extension: a runner claims several dispatched tasks at once (POST /claims)."""

    rollout_ids: list[str]
    worker_id: str | None = None


class FinishManyRequest(BaseModel):
    """agl-events extension: a runner ends several attempts at once (POST /attempts/finish)."""

    finishes: list[AttemptFinish]

    @model_validator(mode="after")
    def _each_attempt_once(self) -> FinishManyRequest:
        """The batch's finishes are decided concurrently: an attempt named twice would end twice in no set
        order, and the outcome of the one overwritten would report an end that did not last."""
        seen: set[tuple[str, str]] = set()
        for finish in self.finishes:
            key = (finish.rollout_id, finish.attempt_id)
            if key in seen:
                raise ValueError(f"attempt {finish.attempt_id} of rollout {finish.rollout_id} is named twice")
            seen.add(key)
        return self


class TaskRequestStatus(BaseModel):
    """agl-events extension: what a task request with idempotency key `key` became (null: not ingested yet)."""

    key: str
    rollout: Rollout | None


class FinishAttemptRequest(BaseModel):
    """agl-events extension: a runner ends an attempt whose spans it produced to the span topic itself."""

    status: Literal["succeeded", "failed"]
    spans_through: SpansThrough = {}

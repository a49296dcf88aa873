"""The `/v1/agl` store API of Agent Lightning 0.3.0 as a FastAPI router over any `LightningStore`.

Paths, bodies, status codes and JSON shapes follow upstream's `LightningStoreServer` so the unchanged upstream
`LightningStoreClient` works against it (contract §3.1). The router does not know about experiments: it gets its
store from a FastAPI dependency, so the app can mount it once per URL prefix and pick the store per request.
Errors raised by the store are mapped to HTTP statuses by `agl_events.server.errors`, not here.
"""

# No `from __future__ import annotations` here: FastAPI must evaluate the route signatures, which use
# dependency aliases local to the router factory.
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel

from agl_events.server.errors import ERROR_RESPONSES
from agl_events.server.requests import (
    ClaimManyRequest,
    ClaimResponse,
    DequeueManyRolloutsRequest,
    EnqueueManyRolloutsRequest,
    FindTaskRequestsRequest,
    FinishAttemptRequest,
    FinishManyRequest,
    HealthStatus,
    NextSequenceIdRequest,
    NextSequenceIdResponse,
    QueryAttemptsRequest,
    QueryResourcesRequest,
    QueryRolloutsRequest,
    QuerySpansRequest,
    QueryWorkersRequest,
    RolloutRequest,
    StartAttemptRequest,
    TaskRequestStatus,
    UpdateAttemptRequest,
    UpdateRolloutRequest,
    UpdateWorkerRequest,
    WaitForRolloutsRequest,
)
from agl_events.server.responses import RolloutOrAttempted, respond, respond_page, validate_pagination
from agl_events.store import route_table as routes
from agl_events.store.contract import LightningStore
from agl_events.types import (
    UNSET,
    Attempt,
    AttemptedRollout,
    FinishOutcome,
    NamedResources,
    PaginatedResult,
    PromptCandidate,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)

#: A FastAPI dependency that yields the store serving the current request.
StoreDependency = Callable[..., Awaitable[LightningStore]]
#: A FastAPI dependency that yields why the current request's store stopped serving, or None.
FailureDependency = Callable[..., Awaitable[str | None]]


async def _no_failure() -> str | None:
    return None

AGL_PREFIX = "/v1/agl"


def fixed_store(store: LightningStore) -> StoreDependency:
    """A dependency that always yields `store`, for single-store apps and tests."""

    async def _get() -> LightningStore:
        return store

    return _get


def _present(request: BaseModel | None, field: str) -> Any:
    """The value of a key the client sent, else UNSET (absent keys must not be applied)."""
    if request is None or field not in request.model_fields_set:
        return UNSET
    return getattr(request, field)


def _present_not_null(request: BaseModel | None, field: str) -> Any:
    """As `_present`, for fields the store cannot take as None: an explicit null is a 400, as upstream."""
    value = _present(request, field)
    if value is None:
        raise HTTPException(status_code=400, detail=f"{field} is invalid; it cannot be a null value.")
    return value


def _spans_query(store: LightningStore, q: QuerySpansRequest) -> Awaitable[Any]:
    return store.query_spans(
        q.rollout_id, q.attempt_id, trace_id=q.trace_id, trace_id_contains=q.trace_id_contains,
        span_id=q.span_id, span_id_contains=q.span_id_contains, parent_id=q.parent_id,
        parent_id_contains=q.parent_id_contains, name=q.name, name_contains=q.name_contains,
        filter_logic=q.logic, limit=q.limit, offset=q.offset, sort_by=q.sort_by,
        sort_order=q.order,
    )


def create_agl_router(get_store: StoreDependency, get_failure: FailureDependency = _no_failure) -> APIRouter:
    """Build the `/v1/agl/...` routes; every store-backed route resolves its store through `get_store`.

    `/health` answers 503 with the reason once `get_failure` reports one (without opening a store: a probe
    must not wait for a catch-up), so the upstream client's retries see an unhealthy server as such.

    Order matters where a literal segment competes with a path parameter (`/rollouts/search` before
    `/rollouts/{rollout_id}`, `/resources/latest` before `/resources/{resources_id}`, ...).
    """
    router = APIRouter(prefix=AGL_PREFIX, responses=ERROR_RESPONSES)
    Store = Annotated[LightningStore, Depends(get_store)]

    @router.get("/health", response_model=HealthStatus, responses={503: {"model": HealthStatus}})
    async def health(failure: Annotated[str | None, Depends(get_failure)]) -> JSONResponse:
        if failure is not None:
            return JSONResponse({"status": "unhealthy", "detail": failure}, status_code=503)
        return JSONResponse({"status": "ok"})

    # --- queue -------------------------------------------------------------------------------------------
    @router.post(routes.ENQUEUE.path, status_code=201, response_model=list[Rollout])
    async def enqueue_rollouts(request: EnqueueManyRolloutsRequest, store: Store) -> JSONResponse:
        if not request.rollouts:
            return respond([], list[Rollout], 201)
        if len(request.rollouts) == 1:
            one = request.rollouts[0]
            rollout = await store.enqueue_rollout(
                input=one.input, mode=one.mode, resources_id=one.resources_id, config=one.config,
                metadata=one.metadata,
            )
            return respond([rollout], list[Rollout], 201)
        return respond(list(await store.enqueue_many_rollouts(request.rollouts)), list[Rollout], 201)

    @router.post(routes.DEQUEUE.path, response_model=list[AttemptedRollout])
    async def dequeue_rollouts(
        store: Store, request: Annotated[DequeueManyRolloutsRequest | None, Body()] = None
    ) -> JSONResponse:
        payload = request or DequeueManyRolloutsRequest()
        if payload.limit <= 0:
            return respond([], list[AttemptedRollout])
        if payload.limit == 1:
            single = await store.dequeue_rollout(worker_id=payload.worker_id)
            return respond([single] if single else [], list[AttemptedRollout])
        claimed = await store.dequeue_many_rollouts(limit=payload.limit, worker_id=payload.worker_id)
        return respond(list(claimed), list[AttemptedRollout])

    # --- rollouts ----------------------------------------------------------------------------------------
    @router.post(routes.START_ROLLOUT.path, status_code=201, response_model=AttemptedRollout)
    async def start_rollout(request: RolloutRequest, store: Store) -> JSONResponse:
        started = await store.start_rollout(
            input=request.input, mode=request.mode, resources_id=request.resources_id, config=request.config,
            metadata=request.metadata, worker_id=request.worker_id,
        )
        return respond(started, AttemptedRollout, 201)

    async def _query_rollouts(q: QueryRolloutsRequest, store: LightningStore) -> JSONResponse:
        validate_pagination(q, Rollout)
        result = await store.query_rollouts(
            status_in=q.status_in, rollout_id_in=q.rollout_id_in, rollout_id_contains=q.rollout_id_contains,
            filter_logic=q.logic, sort_by=q.sort_by, sort_order=q.order,
            limit=q.limit, offset=q.offset,
        )
        return respond_page(result, RolloutOrAttempted, limit=q.limit, offset=q.offset)

    @router.get(routes.QUERY_ROLLOUTS.path, response_model=PaginatedResult[RolloutOrAttempted])
    async def query_rollouts(q: Annotated[QueryRolloutsRequest, Query()], store: Store) -> JSONResponse:
        return await _query_rollouts(q, store)

    @router.post(routes.SEARCH_ROLLOUTS.path, response_model=PaginatedResult[RolloutOrAttempted])
    async def search_rollouts(q: QueryRolloutsRequest, store: Store) -> JSONResponse:
        return await _query_rollouts(q, store)

    @router.get(routes.GET_ROLLOUT.path, response_model=RolloutOrAttempted | None)
    async def get_rollout_by_id(rollout_id: str, store: Store) -> JSONResponse:
        return respond(await store.get_rollout_by_id(rollout_id), RolloutOrAttempted | None)

    @router.post(routes.UPDATE_ROLLOUT.path, response_model=Rollout)
    async def update_rollout(
        rollout_id: str, request: Annotated[UpdateRolloutRequest, Body()], store: Store
    ) -> JSONResponse:
        updated = await store.update_rollout(
            rollout_id=rollout_id,
            input=_present(request, "input"),
            mode=_present(request, "mode"),
            resources_id=_present(request, "resources_id"),
            status=_present_not_null(request, "status"),
            config=_present_not_null(request, "config"),
            metadata=_present(request, "metadata"),
        )
        return respond(updated, Rollout)

    # --- attempts ----------------------------------------------------------------------------------------
    @router.post(routes.START_ATTEMPT.path, status_code=201, response_model=AttemptedRollout)
    async def start_attempt(
        rollout_id: str, store: Store, request: Annotated[StartAttemptRequest | None, Body()] = None
    ) -> JSONResponse:
        worker_id = request.worker_id if request else None
        return respond(await store.start_attempt(rollout_id, worker_id=worker_id), AttemptedRollout, 201)

    @router.post(routes.CLAIM.path, response_model=ClaimResponse)
    async def claim_rollout(
        rollout_id: str, store: Store, request: Annotated[StartAttemptRequest | None, Body()] = None
    ) -> JSONResponse:
        """agl-events extension, not in Agent Lightning: runners on the tasks topic claim a queued rollout."""
        claimed = await store.claim_rollout(rollout_id, worker_id=request.worker_id if request else None)
        body = ClaimResponse.model_validate(claimed.model_dump() if claimed else {"rollout": None,
                                                                                   "next_sequence_id": None})
        return respond(body, ClaimResponse)

    @router.post(routes.FINISH_ATTEMPT.path, response_model=Attempt)
    async def finish_attempt(
        rollout_id: str, attempt_id: str, request: FinishAttemptRequest, store: Store
    ) -> JSONResponse:
        """agl-events extension: a runner ends an attempt once the store has read its spans from the span topic."""
        return respond(await store.finish_attempt(rollout_id, attempt_id, request.status, request.spans_through),
                       Attempt)

    @router.post(routes.CLAIMS.path, response_model=list[ClaimResponse])
    async def claim_rollouts(request: ClaimManyRequest, store: Store) -> JSONResponse:
        """agl-events extension: a runner with several free slots claims the tasks it took, in one call; each
        answer is null-rollout where that rollout was no longer waiting. Rollouts of any partition."""
        claimed = await store.claim_rollouts(request.rollout_ids, worker_id=request.worker_id)
        body = [ClaimResponse.model_validate(c.model_dump() if c else {"rollout": None, "next_sequence_id": None})
                for c in claimed]
        return respond(body, list[ClaimResponse])

    @router.post(routes.FINISH_ATTEMPTS.path, response_model=list[FinishOutcome])
    async def finish_attempts(request: FinishManyRequest, store: Store) -> JSONResponse:
        """agl-events extension: a runner ends several attempts in one call, once the store has read their
        spans; an outcome per attempt, in order (an attempt the store refuses carries its error alone)."""
        return respond(await store.finish_attempts(request.finishes), list[FinishOutcome])

    @router.get(routes.TASK_REQUEST.path, response_model=TaskRequestStatus)
    async def task_request_status(key: str, store: Store) -> JSONResponse:
        """agl-events extension: the rollout a task request of the task-requests topic became, if any yet."""
        rollout_id = (await store.task_rollouts([key])).get(key)
        rollout = await store.get_rollout_by_id(rollout_id) if rollout_id is not None else None
        return respond(TaskRequestStatus(key=key, rollout=rollout), TaskRequestStatus)

    @router.post(routes.FIND_TASK_REQUESTS.path, response_model=dict[str, str])
    async def find_task_requests(request: FindTaskRequestsRequest, store: Store) -> JSONResponse:
        """agl-events extension: the rollouts that those of `keys` ingested yet became (an ingesting store
        of a group asks the others before it decides)."""
        return respond(await store.task_rollouts(request.keys), dict[str, str])

    @router.get(routes.PROMPT_CANDIDATES.path, response_model=list[PromptCandidate])
    async def prompt_candidates(store: Store, run_id: str | None = None) -> JSONResponse:
        """agl-events extension: the candidates of an APO run (all runs without `run_id`), with their scores."""
        return respond(await store.query_prompt_candidates(run_id), list[PromptCandidate])

    async def _query_attempts(rollout_id: str, q: QueryAttemptsRequest, store: LightningStore) -> JSONResponse:
        validate_pagination(q, Attempt)
        result = await store.query_attempts(
            rollout_id, sort_by=q.sort_by, sort_order=q.order,
            limit=q.limit, offset=q.offset,
        )
        return respond_page(result, Attempt, limit=q.limit, offset=q.offset)

    @router.get(routes.QUERY_ATTEMPTS.path, response_model=PaginatedResult[Attempt])
    async def query_attempts(
        rollout_id: str, q: Annotated[QueryAttemptsRequest, Query()], store: Store
    ) -> JSONResponse:
        return await _query_attempts(rollout_id, q, store)

    @router.post(routes.SEARCH_ATTEMPTS.path, response_model=PaginatedResult[Attempt])
    async def search_attempts(rollout_id: str, q: QueryAttemptsRequest, store: Store) -> JSONResponse:
        return await _query_attempts(rollout_id, q, store)

    @router.get(routes.LATEST_ATTEMPT.path, response_model=Attempt | None)
    async def get_latest_attempt(rollout_id: str, store: Store) -> JSONResponse:
        return respond(await store.get_latest_attempt(rollout_id), Attempt | None)

    @router.post(routes.UPDATE_ATTEMPT.path, response_model=Attempt)
    async def update_attempt(
        rollout_id: str, attempt_id: str, request: Annotated[UpdateAttemptRequest, Body()], store: Store
    ) -> JSONResponse:
        updated = await store.update_attempt(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            status=_present_not_null(request, "status"),
            worker_id=_present_not_null(request, "worker_id"),
            last_heartbeat_time=_present_not_null(request, "last_heartbeat_time"),
            metadata=_present_not_null(request, "metadata"),
        )
        return respond(updated, Attempt)

    # --- workers -----------------------------------------------------------------------------------------
    async def _query_workers(q: QueryWorkersRequest, store: LightningStore) -> JSONResponse:
        validate_pagination(q, Worker)
        result = await store.query_workers(
            status_in=q.status_in, worker_id_contains=q.worker_id_contains,
            filter_logic=q.logic, sort_by=q.sort_by, sort_order=q.order,
            limit=q.limit, offset=q.offset,
        )
        return respond_page(result, Worker, limit=q.limit, offset=q.offset)

    @router.get(routes.QUERY_WORKERS.path, response_model=PaginatedResult[Worker])
    async def query_workers(q: Annotated[QueryWorkersRequest, Query()], store: Store) -> JSONResponse:
        return await _query_workers(q, store)

    @router.post("/workers/search", response_model=PaginatedResult[Worker])
    async def search_workers(q: QueryWorkersRequest, store: Store) -> JSONResponse:
        return await _query_workers(q, store)

    @router.get("/workers/{worker_id}", response_model=Worker | None)
    async def get_worker(worker_id: str, store: Store) -> JSONResponse:
        return respond(await store.get_worker_by_id(worker_id), Worker | None)

    @router.post(routes.UPDATE_WORKER.path, response_model=Worker)
    async def update_worker(
        worker_id: str, store: Store, request: Annotated[UpdateWorkerRequest | None, Body()] = None
    ) -> JSONResponse:
        stats = _present_not_null(request, "heartbeat_stats")
        return respond(await store.update_worker(worker_id, heartbeat_stats=stats), Worker)

    @router.get(routes.STATISTICS.path, response_model=dict[str, Any])
    async def statistics(store: Store) -> JSONResponse:
        return respond(await store.statistics(), dict[str, Any])

    # --- resources ---------------------------------------------------------------------------------------
    @router.get(routes.QUERY_RESOURCES.path, response_model=PaginatedResult[ResourcesUpdate])
    async def query_resources(q: Annotated[QueryResourcesRequest, Query()], store: Store) -> JSONResponse:
        validate_pagination(q, ResourcesUpdate)
        result = await store.query_resources(
            resources_id=q.resources_id, resources_id_contains=q.resources_id_contains,
            sort_by=q.sort_by, sort_order=q.order, limit=q.limit, offset=q.offset,
        )
        return respond_page(result, ResourcesUpdate, limit=q.limit, offset=q.offset)

    @router.post("/resources", status_code=201, response_model=ResourcesUpdate)
    async def add_resources(resources: Annotated[NamedResources, Body()], store: Store) -> JSONResponse:
        return respond(await store.add_resources(resources), ResourcesUpdate, 201)

    @router.get(routes.LATEST_RESOURCES.path, response_model=ResourcesUpdate | None)
    async def get_latest_resources(store: Store) -> JSONResponse:
        return respond(await store.get_latest_resources(), ResourcesUpdate | None)

    @router.post("/resources/{resources_id}", response_model=ResourcesUpdate)
    async def update_resources(
        resources_id: str, resources: Annotated[NamedResources, Body()], store: Store
    ) -> JSONResponse:
        return respond(await store.update_resources(resources_id, resources), ResourcesUpdate)

    @router.get(routes.GET_RESOURCES.path, response_model=ResourcesUpdate | None)
    async def get_resources_by_id(resources_id: str, store: Store) -> JSONResponse:
        return respond(await store.get_resources_by_id(resources_id), ResourcesUpdate | None)

    # --- spans -------------------------------------------------------------------------------------------
    @router.post(routes.ADD_SPAN.path, status_code=201, response_model=Span | None)
    async def add_span(span: Span, store: Store) -> JSONResponse:
        # null (still 201) means the span was a duplicate and was skipped.
        return respond(await store.add_span(span), Span | None, 201)

    @router.get(routes.QUERY_SPANS.path, response_model=PaginatedResult[Span])
    async def query_spans(q: Annotated[QuerySpansRequest, Query()], store: Store) -> JSONResponse:
        validate_pagination(q, Span)
        return respond_page(await _spans_query(store, q), Span, limit=q.limit, offset=q.offset)

    @router.post(routes.SEARCH_SPANS.path, response_model=PaginatedResult[Span])
    async def search_spans(q: QuerySpansRequest, store: Store) -> JSONResponse:
        validate_pagination(q, Span)
        return respond_page(await _spans_query(store, q), Span, limit=q.limit, offset=q.offset)

    @router.post(routes.NEXT_SEQUENCE_ID.path, response_model=NextSequenceIdResponse)
    async def next_span_sequence_id(request: NextSequenceIdRequest, store: Store) -> dict[str, int]:
        """The first of `count` consecutive ids reserved (one, as upstream, unless our tracer asks for a block);
        with `check_attempt`, none for an attempt the store does not have (a 400 saying which it has)."""
        if request.check_attempt:
            attempts = [a.attempt_id for a in (await store.query_attempts(request.rollout_id)).items]
            if request.attempt_id not in attempts:
                raise ValueError(f"its attempts: {', '.join(attempts)}" if attempts else
                                 "no such rollout, or no attempt yet")
        issued = await store.get_many_span_sequence_ids([(request.rollout_id, request.attempt_id)] * request.count)
        return {"sequence_id": issued[0]}

    # --- waits -------------------------------------------------------------------------------------------
    @router.post(routes.WAIT_ROLLOUTS.path, response_model=list[Rollout])
    async def wait_for_rollouts(request: WaitForRolloutsRequest, store: Store) -> JSONResponse:
        done = await store.wait_for_rollouts(rollout_ids=request.rollout_ids, timeout=request.timeout)
        return respond(list(done), list[Rollout])

    router.routes.sort(key=lambda route: not isinstance(route, APIRoute) or
                       (next(iter(route.methods)), route.path.removeprefix(AGL_PREFIX)) not in _HOT)
    return router


#: Routes called per span or per rollout (our runners and LLM proxy, upstream's runners), tried first: FastAPI
#: tries a request against the routes one by one (several µs each), and these come late in the declared order,
#: which follows upstream's server (`/spans/next` was the 34th). With `ExperimentPrefixMiddleware`, a
#: `/spans/next` request through the whole app on an in-memory store went from 490-590 to 370-420 µs. Their
#: paths have no parameters, so moving them ahead shadows no other route (tests/server/test_routes.py).
_HOT = frozenset((route.method, route.path) for route in (
    routes.NEXT_SEQUENCE_ID, routes.CLAIMS, routes.FINISH_ATTEMPTS, routes.ADD_SPAN, routes.DEQUEUE, routes.ENQUEUE,
    routes.WAIT_ROLLOUTS))


__all__ = ["AGL_PREFIX", "StoreDependency", "create_agl_router", "fixed_store"]

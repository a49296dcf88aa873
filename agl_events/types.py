"""The data models of Agent Lightning 0.3.0's store, field for field, so JSON shapes match on the wire.

Every layer shares these: commands take them, views return them, the REST server serializes them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Generic, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, model_validator

RolloutStatus = Literal["queuing", "preparing", "running", "failed", "succeeded", "cancelled", "requeuing"]
AttemptStatus = Literal["preparing", "running", "failed", "succeeded", "unresponsive", "timeout"]
WorkerStatus = Literal["idle", "busy", "unknown"]
RolloutMode = Literal["train", "val", "test"]
StatusCode = Literal["UNSET", "OK", "ERROR"]

#: Bounds of the Avro `int` and `long` these numbers are logged as: a larger one, taken from a caller, would
#: fail the append (fastavro's OverflowError, a 500) or, for `int`, be written where other readers cannot read it.
AVRO_INT_MAX = 2**31 - 1
AVRO_LONG_MIN, AVRO_LONG_MAX = -(2**63), 2**63 - 1

#: OTel integer attributes are 64-bit (OTLP's int_value). A larger integer is taken as a float: that is what
#: the Avro log holds for it (the attribute union's `double`), so the view, folded from the store's own
#: value, agrees with a replay of the log (an unbounded int also broke the view's JSON, wedging the store).
AttributeInt = Annotated[int, Field(ge=AVRO_LONG_MIN, le=AVRO_LONG_MAX)]
AttributeValue = (str | bool | AttributeInt | float | Sequence[str] | Sequence[bool] | Sequence[AttributeInt]
                  | Sequence[float])
Attributes = dict[str, AttributeValue]

QUEUING_STATUSES: frozenset[str] = frozenset({"queuing", "requeuing"})
RUNNING_STATUSES: frozenset[str] = frozenset({"preparing", "running"})
FINISHED_STATUSES: frozenset[str] = frozenset({"failed", "succeeded", "cancelled"})


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


class RolloutConfig(BaseModel):
    timeout_seconds: float | None = None
    unresponsive_seconds: float | None = None
    max_attempts: int = Field(default=1, ge=1, le=AVRO_INT_MAX)
    retry_condition: list[AttemptStatus] = Field(default_factory=list)


class Attempt(BaseModel):
    rollout_id: str
    attempt_id: str
    sequence_id: int
    start_time: float
    end_time: float | None = None
    status: AttemptStatus = "preparing"
    worker_id: str | None = None
    last_heartbeat_time: float | None = None
    metadata: dict[str, Any] | None = None


class Rollout(BaseModel):
    rollout_id: str
    input: Any
    start_time: float
    end_time: float | None = None
    mode: RolloutMode | None = None
    resources_id: str | None = None
    status: RolloutStatus = "queuing"
    config: RolloutConfig = Field(default_factory=RolloutConfig)
    metadata: dict[str, Any] | None = None


class AttemptedRollout(Rollout):
    attempt: Attempt

    @model_validator(mode="after")
    def _same_rollout(self) -> AttemptedRollout:
        if self.attempt.rollout_id != self.rollout_id:
            raise ValueError("Inconsistent rollout_id between Rollout and Attempt")
        return self


class Claim(BaseModel):
    """agl-events extension: what a runner gets for a dispatched task it claimed."""

    rollout: AttemptedRollout
    #: The first of the span sequence ids the claim reserved for this attempt: the runner's tracer numbers
    #: spans from here ...
    next_sequence_id: int
    #: ... through here, then reserves another block of as many from the store. No other attempt gets these.
    reserved_through: int
    #: The resources to run with: the rollout's own, or the latest ones when it names none, so a runner
    #: that has them cached makes no further call.
    resources_id: str | None


#: Span-topic partition -> the offset just past an attempt's last span (from the runner's delivery reports).
#: Both non-negative: a negative partition was taken and waited for as already folded.
SpansThrough = dict[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]


class AttemptFinish(BaseModel):
    """agl-events extension: one attempt a runner ends, whose spans it produced to the span topic itself up to
    `spans_through` (partition -> next offset). None: some were written by others too (the LLM proxy's, for a
    rollout whose resources hold a ProxyLLM), so the store folds the span topic to where it ends now."""

    rollout_id: str
    attempt_id: str
    status: Literal["succeeded", "failed"]
    spans_through: SpansThrough | None = {}


class FinishOutcome(BaseModel):
    """agl-events extension: what became of one AttemptFinish of a batch (the attempt, or why not)."""

    attempt: Attempt | None = None
    error: str | None = None


class EnqueueRolloutRequest(BaseModel):
    input: Any
    mode: RolloutMode | None = None
    resources_id: str | None = None
    config: RolloutConfig | None = None
    metadata: dict[str, Any] | None = None


class Worker(BaseModel):
    worker_id: str
    status: WorkerStatus = "unknown"
    heartbeat_stats: dict[str, Any] | None = None
    last_heartbeat_time: float | None = None
    last_dequeue_time: float | None = None
    last_busy_time: float | None = None
    last_idle_time: float | None = None
    current_rollout_id: str | None = None
    current_attempt_id: str | None = None


class SpanContext(BaseModel):
    model_config = ConfigDict(extra="allow")
    trace_id: str
    span_id: str
    is_remote: bool
    trace_state: dict[str, str]


class TraceStatus(BaseModel):
    model_config = ConfigDict(extra="allow")
    status_code: StatusCode
    description: str | None = None


class Event(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    attributes: Attributes
    timestamp: float | None = None


class Link(BaseModel):
    model_config = ConfigDict(extra="allow")
    context: SpanContext
    attributes: Attributes | None = None


class OtelResource(BaseModel):
    attributes: Attributes
    schema_url: str


class Span(BaseModel):
    """A span as Agent Lightning stores it. Unknown fields are kept (extra='allow'), as upstream."""

    model_config = ConfigDict(extra="allow")
    rollout_id: str
    attempt_id: str
    sequence_id: int = Field(ge=AVRO_LONG_MIN, le=AVRO_LONG_MAX)
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    status: TraceStatus
    attributes: Attributes
    events: list[Event]
    links: list[Link]
    start_time: float | None
    end_time: float | None
    context: SpanContext | None
    parent: SpanContext | None
    resource: OtelResource


class Resource(BaseModel):
    model_config = ConfigDict(extra="allow")
    resource_type: str


class LLM(Resource):
    resource_type: Literal["llm"] = "llm"
    endpoint: str
    model: str
    api_key: str | None = None
    sampling_parameters: dict[str, Any] = Field(default_factory=dict)


class ProxyLLM(LLM):
    """An LLM behind the LLM proxy: each rollout attempt calls it at its own route, so calls are attributed."""

    resource_type: Literal["proxy_llm"] = "proxy_llm"  # type: ignore[assignment]

    def get_base_url(self, rollout_id: str | None, attempt_id: str | None) -> str:
        """Upstream's: the endpoint routed to one attempt (both ids), or as it is (neither)."""
        if rollout_id is None and attempt_id is None:
            return self.endpoint
        if not (isinstance(rollout_id, str) and isinstance(attempt_id, str)):
            raise ValueError("rollout_id and attempt_id must be strings or all be empty")
        return proxy_base_url(self.endpoint, rollout_id, attempt_id)

    def with_attempted_rollout(self, rollout: AttemptedRollout) -> LLM:
        """The plain LLM of this rollout attempt's route, as upstream's `@rollout` hands agents."""
        return LLM(endpoint=self.get_base_url(rollout.rollout_id, rollout.attempt.attempt_id), model=self.model,
                   sampling_parameters=self.sampling_parameters, api_key=self.api_key)


def proxy_base_url(endpoint: str, rollout_id: str, attempt_id: str) -> str:
    """Upstream's `ProxyLLM.get_base_url`: `<host>/rollout/<rid>/attempt/<aid>[/v1]`, so the LLM proxy
    can attribute each call to its attempt."""
    prefix = endpoint[:-1] if endpoint.endswith("/") else endpoint
    has_v1 = prefix.endswith("/v1")
    if has_v1:
        prefix = prefix[:-3]
    prefix += f"/rollout/{rollout_id}/attempt/{attempt_id}"
    return prefix + "/v1" if has_v1 else prefix


class PromptTemplate(Resource):
    resource_type: Literal["prompt_template"] = "prompt_template"
    template: str
    engine: Literal["jinja", "f-string", "poml"]

    def format(self, **kwargs: Any) -> str:
        """Fill the template; only the f-string engine is supported, as upstream."""
        if self.engine != "f-string":
            raise NotImplementedError(f"formatting {self.engine} templates is not supported")
        return self.template.format(**kwargs)


ResourceUnion = Annotated[LLM | ProxyLLM | PromptTemplate, Field(discriminator="resource_type")]
NamedResources = dict[str, ResourceUnion]


class ResourcesUpdate(BaseModel):
    resources_id: str
    create_time: float
    update_time: float
    version: int
    resources: NamedResources


class PromptCandidateStep(BaseModel):
    """A step of a prompt optimization run (APO), as the `PromptCandidateRecorded` event holds it."""

    run_id: str
    candidate_id: str
    stage: Literal["proposed", "scored", "failed"]
    round: int = Field(ge=0)
    parent_id: str | None = None
    template: str | None = None
    critique: str | None = None
    scope: Literal["batch", "full"] | None = None
    score: float | None = None
    rollout_ids: list[str] = Field(default_factory=list)
    reason: str | None = None


class CandidateScore(BaseModel):
    round: int
    scope: Literal["batch", "full"]
    score: float | None
    rollout_ids: list[str]
    time: float


class PromptCandidate(BaseModel):
    """A candidate of an APO run as the store's view folds its steps: what it was, where from, its scores."""

    run_id: str
    candidate_id: str
    status: Literal["proposed", "failed"] | None = None  # None: scored, its proposal not seen (not expected)
    round: int | None = None
    parent_id: str | None = None
    template: str | None = None
    critique: str | None = None
    reason: str | None = None
    time: float | None = None
    scores: list[CandidateScore] = Field(default_factory=list)

    @property
    def best_full_score(self) -> float | None:
        full = [s.score for s in self.scores if s.scope == "full" and s.score is not None]
        return max(full) if full else None


T = TypeVar("T")


class PaginatedResult(BaseModel, Sequence[T], Generic[T]):  # type: ignore[misc]
    """A page of results that behaves as a sequence and says where it sits in the whole."""

    items: Sequence[T]
    limit: int
    offset: int
    total: int

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        return self.items[index]

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        return iter(self.items)

    def __repr__(self) -> str:
        first = repr(self.items[0]) if self.items else "empty"
        items = f"[{first}, ...]" if len(self.items) > 1 else first
        window = f"{self.offset}:" if self.limit == -1 else f"{self.offset}:{self.offset + self.limit}"
        return f"<PaginatedResult ({window} of {self.total}) {items}>"


class Triplet(BaseModel):
    """One LLM call of a trajectory, as Agent Lightning 0.3.0's adapters emit it.

    `prompt` is `{"token_ids": [...], "raw_content": ...}`, `response` is `{"token_ids": [...], "raw_content":
    ..., "logprobs": [...]}` (keys present when the spans had them), `metadata` holds `response_id` and
    `agent_name`. Kept as loose dicts, as upstream, so every adapter's extras travel unchanged.
    """

    prompt: Any
    response: Any
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

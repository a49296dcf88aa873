"""Typed events: one frozen dataclass per event kind, with the fields of its schema (`schemas/<Kind>.avsc`).

Commands build them (`ctx.emit(SpanAdded.of(span))`), the log encodes `to_record()`, and the reducers read the
attributes of `from_record(decoded)`. `tests/events/test_typed.py` checks every class against its schema,
field by field and type by type, both ways. The registry (`events.kinds`) names each kind's class.
"""

from agl_events.events.typed.attempts import AttemptCreated, AttemptHeartbeat, AttemptStatusChanged, AttemptUpdated
from agl_events.events.typed.base import Decided, Event, Record
from agl_events.events.typed.records import Attempt, ResourcesSnapshot, Rollout, RolloutConfig
from agl_events.events.typed.resources import PromptCandidateRecorded, ResourcesPublished, ResourcesUpdated
from agl_events.events.typed.rollouts import (
    RolloutEnqueued,
    RolloutFinished,
    RolloutStarted,
    RolloutStatusChanged,
    RolloutUpdated,
)
from agl_events.events.typed.samples import SampleAdded, Triplet
from agl_events.events.typed.span import (
    SPAN_FOLD_FIELDS,
    Attributes,
    Span,
    SpanContext,
    SpanEvent,
    SpanKeys,
    SpanLink,
    span_model,
    span_of,
)
from agl_events.events.typed.spans import SpanAdded, SpanSequenceReserved
from agl_events.events.typed.tasks import TaskDispatched, TaskRequested
from agl_events.events.typed.workers import RunnersStopRequested, WorkerHeartbeat, WorkerStatusChanged

__all__ = [
    "SPAN_FOLD_FIELDS", "Attempt", "AttemptCreated", "AttemptHeartbeat", "AttemptStatusChanged", "AttemptUpdated",
    "Attributes", "Decided", "Event", "PromptCandidateRecorded", "Record", "ResourcesPublished", "ResourcesSnapshot",
    "ResourcesUpdated", "Rollout", "RolloutConfig", "RolloutEnqueued", "RolloutFinished", "RolloutStarted",
    "RolloutStatusChanged", "RolloutUpdated", "RunnersStopRequested", "SampleAdded", "Span", "SpanAdded",
    "SpanContext", "SpanEvent", "SpanKeys", "SpanLink", "SpanSequenceReserved", "TaskDispatched", "TaskRequested",
    "Triplet", "WorkerHeartbeat", "WorkerStatusChanged", "span_model", "span_of",
]

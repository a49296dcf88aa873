"""The one registry of event kinds: the typed class of each, which topic it is appended to, whether views fold it.

Schemas (`schemas/<Kind>.avsc`), the typed classes (`events.typed`), the topic layout, the reducers and the
store service all read this table, and tests check that they agree: adding a kind means adding it here, its
schema, its class, and (if folded) its reducer. Pure: imports only the topic layout and the typed classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agl_events.events import typed
from agl_events.topics import Topic


class Kind(StrEnum):
    ROLLOUT_ENQUEUED = "RolloutEnqueued"
    ROLLOUT_STARTED = "RolloutStarted"
    ROLLOUT_UPDATED = "RolloutUpdated"
    ROLLOUT_STATUS_CHANGED = "RolloutStatusChanged"
    ATTEMPT_CREATED = "AttemptCreated"
    ATTEMPT_STATUS_CHANGED = "AttemptStatusChanged"
    ATTEMPT_UPDATED = "AttemptUpdated"
    ATTEMPT_HEARTBEAT = "AttemptHeartbeat"
    SPAN_ADDED = "SpanAdded"
    SPAN_SEQUENCE_RESERVED = "SpanSequenceReserved"
    ROLLOUT_FINISHED = "RolloutFinished"
    RESOURCES_PUBLISHED = "ResourcesPublished"
    RESOURCES_UPDATED = "ResourcesUpdated"
    WORKER_HEARTBEAT = "WorkerHeartbeat"
    WORKER_STATUS_CHANGED = "WorkerStatusChanged"
    RUNNERS_STOP_REQUESTED = "RunnersStopRequested"
    TASK_DISPATCHED = "TaskDispatched"
    SAMPLE_ADDED = "SampleAdded"
    TASK_REQUESTED = "TaskRequested"
    PROMPT_CANDIDATE_RECORDED = "PromptCandidateRecorded"


@dataclass(frozen=True)
class KindSpec:
    """Where a kind lives and what it is. `event`: its typed class (named as the kind). `folded`: the store's
    view changes with it (else it is for other readers: runners, the samples processor, trainers)."""

    topic: Topic
    event: type[typed.Event]
    folded: bool = True


KINDS: dict[str, KindSpec] = {
    Kind.ROLLOUT_ENQUEUED: KindSpec(Topic.ROLLOUTS, typed.RolloutEnqueued),
    Kind.ROLLOUT_STARTED: KindSpec(Topic.ROLLOUTS, typed.RolloutStarted),
    Kind.ROLLOUT_UPDATED: KindSpec(Topic.ROLLOUTS, typed.RolloutUpdated),
    Kind.ROLLOUT_STATUS_CHANGED: KindSpec(Topic.ROLLOUTS, typed.RolloutStatusChanged),
    Kind.ATTEMPT_CREATED: KindSpec(Topic.ATTEMPTS, typed.AttemptCreated),
    Kind.ATTEMPT_STATUS_CHANGED: KindSpec(Topic.ATTEMPTS, typed.AttemptStatusChanged),
    Kind.ATTEMPT_UPDATED: KindSpec(Topic.ATTEMPTS, typed.AttemptUpdated),
    Kind.ATTEMPT_HEARTBEAT: KindSpec(Topic.ATTEMPTS, typed.AttemptHeartbeat),
    Kind.SPAN_ADDED: KindSpec(Topic.SPANS, typed.SpanAdded),
    Kind.SPAN_SEQUENCE_RESERVED: KindSpec(Topic.SPANS, typed.SpanSequenceReserved),
    Kind.ROLLOUT_FINISHED: KindSpec(Topic.SPANS, typed.RolloutFinished, folded=False),
    Kind.RESOURCES_PUBLISHED: KindSpec(Topic.RESOURCES, typed.ResourcesPublished),
    Kind.RESOURCES_UPDATED: KindSpec(Topic.RESOURCES, typed.ResourcesUpdated),
    Kind.WORKER_HEARTBEAT: KindSpec(Topic.WORKERS, typed.WorkerHeartbeat),
    Kind.WORKER_STATUS_CHANGED: KindSpec(Topic.WORKERS, typed.WorkerStatusChanged),
    Kind.RUNNERS_STOP_REQUESTED: KindSpec(Topic.CONTROL, typed.RunnersStopRequested, folded=False),
    Kind.TASK_DISPATCHED: KindSpec(Topic.TASKS, typed.TaskDispatched, folded=False),
    Kind.SAMPLE_ADDED: KindSpec(Topic.SAMPLES, typed.SampleAdded, folded=False),
    Kind.TASK_REQUESTED: KindSpec(Topic.TASK_REQUESTS, typed.TaskRequested, folded=False),
    Kind.PROMPT_CANDIDATE_RECORDED: KindSpec(Topic.RESOURCES, typed.PromptCandidateRecorded),
}

#: Kinds after which a rollout may have reached a finished status (wakes `wait_for_rollouts`).
FINISHING_KINDS = frozenset({Kind.ROLLOUT_STATUS_CHANGED, Kind.ROLLOUT_UPDATED})


class UnknownEventKind(ValueError):
    """An event whose kind is not in the registry: a newer producer, or a bug. Never silently skipped."""


def spec(kind: str) -> KindSpec:
    try:
        return KINDS[kind]
    except KeyError:
        raise UnknownEventKind(f"unknown event kind {kind!r}; known kinds: {', '.join(KINDS)}") from None

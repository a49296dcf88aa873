"""The one registry of event kinds: which topic each is appended to, and whether views fold it.

Schemas (`schemas/<Kind>.avsc`), the topic layout, the reducers and the store service all read this table,
and a test checks that they agree: adding a kind means adding it here, its schema, and (if folded) its
reducer. Pure: imports only the topic layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

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
    """Where a kind lives. `folded`: the store's view changes with it (else it is for other readers: runners,
    the samples processor, trainers)."""

    topic: Topic
    folded: bool = True


KINDS: dict[str, KindSpec] = {
    Kind.ROLLOUT_ENQUEUED: KindSpec(Topic.ROLLOUTS),
    Kind.ROLLOUT_STARTED: KindSpec(Topic.ROLLOUTS),
    Kind.ROLLOUT_UPDATED: KindSpec(Topic.ROLLOUTS),
    Kind.ROLLOUT_STATUS_CHANGED: KindSpec(Topic.ROLLOUTS),
    Kind.ATTEMPT_CREATED: KindSpec(Topic.ATTEMPTS),
    Kind.ATTEMPT_STATUS_CHANGED: KindSpec(Topic.ATTEMPTS),
    Kind.ATTEMPT_UPDATED: KindSpec(Topic.ATTEMPTS),
    Kind.ATTEMPT_HEARTBEAT: KindSpec(Topic.ATTEMPTS),
    Kind.SPAN_ADDED: KindSpec(Topic.SPANS),
    Kind.SPAN_SEQUENCE_RESERVED: KindSpec(Topic.SPANS),
    Kind.ROLLOUT_FINISHED: KindSpec(Topic.SPANS, folded=False),
    Kind.RESOURCES_PUBLISHED: KindSpec(Topic.RESOURCES),
    Kind.RESOURCES_UPDATED: KindSpec(Topic.RESOURCES),
    Kind.WORKER_HEARTBEAT: KindSpec(Topic.WORKERS),
    Kind.WORKER_STATUS_CHANGED: KindSpec(Topic.WORKERS),
    Kind.RUNNERS_STOP_REQUESTED: KindSpec(Topic.CONTROL, folded=False),
    Kind.TASK_DISPATCHED: KindSpec(Topic.TASKS, folded=False),
    Kind.SAMPLE_ADDED: KindSpec(Topic.SAMPLES, folded=False),
    Kind.TASK_REQUESTED: KindSpec(Topic.TASK_REQUESTS, folded=False),
    Kind.PROMPT_CANDIDATE_RECORDED: KindSpec(Topic.RESOURCES),
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

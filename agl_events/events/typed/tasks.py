"""Task events: rollouts announced to runners (tasks topic), and requests to enqueue one (task-requests topic)."""

from __future__ import annotations

from dataclasses import dataclass

from agl_events.events.typed.base import Decided, Event


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskDispatched(Decided):
    """A rollout entered the queue at `queue_seq`; runners claim it through the store, which creates the attempt."""

    rollout_id: str
    attempt_id: str | None = None
    attempt_sequence_id: int | None = None
    worker_id: str | None = None
    resources_id: str | None = None
    mode: str | None = None
    input_json: str
    queue_seq: int | None = None

    @property
    def key(self) -> str:
        return self.rollout_id


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRequested(Event):
    """A request, written by any Kafka client, to enqueue one rollout. Not `Decided`: its header is optional, and
    its record key is the producer's idempotency key, which nothing in the request says."""

    event_id: str | None = None
    time: float | None = None
    producer_id: str | None = None
    input_json: str
    mode: str | None = None
    resources_id: str | None = None
    config_json: str | None = None
    metadata_json: str | None = None

"""Pure folds of events into the store's view: `reduce(read, kind, record) -> changes`.

No I/O: a reducer reads the current view through a function and returns the keys to write, so the
same code serves the live store, replay from offset 0 and unit tests on a plain dict. Every reducer
sets values rather than adding to them, so applying an event twice leaves the view as once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agl_events.reducers import attempts, resources, rollouts, spans, workers
from agl_events.reducers.changes import Changes, Pending, Read

Reducer = Callable[[Pending, dict[str, Any]], None]

REDUCERS: dict[str, Reducer] = {
    "RolloutEnqueued": rollouts.rollout_enqueued,
    "RolloutStarted": rollouts.rollout_started,
    "RolloutUpdated": rollouts.rollout_updated,
    "RolloutStatusChanged": rollouts.rollout_status_changed,
    "AttemptCreated": attempts.attempt_created,
    "AttemptUpdated": attempts.attempt_updated,
    "AttemptStatusChanged": attempts.attempt_status_changed,
    "AttemptHeartbeat": attempts.attempt_heartbeat,
    "SpanAdded": spans.span_added,
    "SpanSequenceReserved": spans.span_sequence_reserved,
    "ResourcesPublished": resources.resources_published,
    "ResourcesUpdated": resources.resources_updated,
    "WorkerHeartbeat": workers.worker_heartbeat,
    "WorkerStatusChanged": workers.worker_status_changed,
}


def reduce(read: Read, kind: str, record: dict[str, Any]) -> Changes:
    """The changes event `kind` makes to the view; kinds without a reducer (TaskDispatched) change nothing."""
    pending = Pending(read)
    reducer = REDUCERS.get(kind)
    if reducer is not None:
        reducer(pending, record)
    return pending.changes


__all__ = ["REDUCERS", "Changes", "Read", "reduce"]

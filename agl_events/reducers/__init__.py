"""Pure folds of events into the store's view: `reduce(read, kind, record) -> changes`.

No I/O: a reducer reads the current view through a function and returns the keys to write, so the
same code serves the live store, replay from offset 0 and unit tests on a plain dict. Every reducer
sets values rather than adding to them, so applying an event twice leaves the view as once.

Reducers take typed events (`events.typed`) and read their attributes. Fold drivers hand over decoded
records, which become typed events here, in the dispatch; a command's own event is folded as it was built
(`reduce_event`), with no record in between. A span read from the log is the exception: it is folded from its
keys and kept as its bytes (`spans.span_logged`), never decoded in full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agl_events.events.kinds import KINDS, Kind, UnknownEventKind
from agl_events.events.typed import Event
from agl_events.reducers import attempts, candidates, resources, rollouts, spans, workers
from agl_events.reducers.changes import Changes, Pending, Read

Reducer = Callable[[Pending, Any], None]  # each takes the typed event of its kind

REDUCERS: dict[str, Reducer] = {
    Kind.ROLLOUT_ENQUEUED: rollouts.rollout_enqueued,
    Kind.ROLLOUT_STARTED: rollouts.rollout_started,
    Kind.ROLLOUT_UPDATED: rollouts.rollout_updated,
    Kind.ROLLOUT_STATUS_CHANGED: rollouts.rollout_status_changed,
    Kind.ATTEMPT_CREATED: attempts.attempt_created,
    Kind.ATTEMPT_UPDATED: attempts.attempt_updated,
    Kind.ATTEMPT_STATUS_CHANGED: attempts.attempt_status_changed,
    Kind.ATTEMPT_HEARTBEAT: attempts.attempt_heartbeat,
    Kind.SPAN_ADDED: spans.span_added,
    Kind.SPAN_SEQUENCE_RESERVED: spans.span_sequence_reserved,
    Kind.RESOURCES_PUBLISHED: resources.resources_published,
    Kind.RESOURCES_UPDATED: resources.resources_updated,
    Kind.WORKER_HEARTBEAT: workers.worker_heartbeat,
    Kind.WORKER_STATUS_CHANGED: workers.worker_status_changed,
    Kind.PROMPT_CANDIDATE_RECORDED: candidates.prompt_candidate_recorded,
}


def reduce(read: Read, kind: str, record: dict[str, Any], value: bytes | None = None) -> Changes:
    """The changes event `kind` makes to the view. Kinds the registry marks unfolded (TaskDispatched) change
    nothing; a kind the registry does not know raises UnknownEventKind: skipping it would silently leave the
    view short of what the log holds (the processor dead-letters such events).

    `value`, the event's bytes as the log holds them (`LoggedEvent.value`), is what the view keeps of a span:
    with it, a SpanAdded `record` needs only the header and the span's keys (`SPAN_FOLD_FIELDS`)."""
    return reduce_explained(read, kind, record, value).changes


def reduce_explained(read: Read, kind: str, record: dict[str, Any], value: bytes | None = None) -> Pending:
    """As `reduce`, with `ignored` saying why an event that should have changed something did not."""
    pending = Pending(read)
    reducer = REDUCERS.get(kind)
    if kind == Kind.SPAN_ADDED and value is not None:
        spans.span_logged(pending, record["span"], value)
    elif reducer is not None:
        reducer(pending, KINDS[kind].event.from_record(record))
    elif kind not in KINDS:
        raise UnknownEventKind(f"no reducer and no registry entry for event kind {kind!r}")
    return pending


def reduce_event(read: Read, event: Event) -> Changes:
    """The changes a typed event makes (the kinds of `events.typed` are all registered)."""
    pending = Pending(read)
    reducer = REDUCERS.get(event.kind)
    if reducer is not None:
        reducer(pending, event)
    return pending.changes


__all__ = ["REDUCERS", "Changes", "Pending", "Read", "UnknownEventKind", "reduce", "reduce_event",
           "reduce_explained"]

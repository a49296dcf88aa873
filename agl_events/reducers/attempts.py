"""Folding attempt events: attempt records by rollout and sequence id, and the attempt-id index."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import (
    Attempt,
    AttemptCreated,
    AttemptHeartbeat,
    AttemptStatusChanged,
    AttemptUpdated,
)
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def _put_attempt(view: Pending, attempt: Attempt) -> None:
    rid = attempt.rollout_id
    view.create(keys.attempt(rid, attempt.sequence_id), attempt.to_model(), "attempts")
    view.put(keys.attempt_index(rid, attempt.attempt_id), attempt.sequence_id)


def _existing(view: Pending, rid: str, aid: str) -> tuple[str, dict[str, Any]] | None:
    seq = view.get(keys.attempt_index(rid, aid))
    if seq is None:
        return None
    key = keys.attempt(rid, seq)
    return key, view.get(key)


def attempt_created(view: Pending, event: AttemptCreated) -> None:
    _put_attempt(view, event.attempt)


def attempt_updated(view: Pending, event: AttemptUpdated) -> None:
    _put_attempt(view, event.attempt)


def attempt_status_changed(view: Pending, event: AttemptStatusChanged) -> None:
    found = _existing(view, event.rollout_id, event.attempt_id)
    if found is None:
        view.ignore(f"no attempt {event.attempt_id} of rollout {event.rollout_id}: a status change "
                    f"({event.status}) for an attempt never created")
        return
    key, attempt = found
    changed = {**attempt, "status": event.status}
    if event.end_time is not None:
        changed["end_time"] = event.end_time
    view.put(key, changed)


def attempt_heartbeat(view: Pending, event: AttemptHeartbeat) -> None:
    found = _existing(view, event.rollout_id, event.attempt_id)
    if found is None:
        view.ignore(f"no attempt {event.attempt_id} of rollout {event.rollout_id}: a heartbeat for an "
                    "attempt never created")
        return
    key, attempt = found
    view.put(key, {**attempt, "last_heartbeat_time": event.heartbeat_time})

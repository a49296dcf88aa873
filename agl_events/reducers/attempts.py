"""Folding attempt events: attempt records by rollout and sequence id, and the attempt-id index."""

from __future__ import annotations

from typing import Any

from agl_events.events.convert import attempt_from_record
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def _put_attempt(view: Pending, attempt: dict[str, Any]) -> None:
    rid = attempt["rollout_id"]
    view.create(keys.attempt(rid, attempt["sequence_id"]), attempt, "attempts")
    view.put(keys.attempt_index(rid, attempt["attempt_id"]), attempt["sequence_id"])


def _existing(view: Pending, rid: str, aid: str) -> tuple[str, dict[str, Any]] | None:
    seq = view.get(keys.attempt_index(rid, aid))
    if seq is None:
        return None
    key = keys.attempt(rid, seq)
    return key, view.get(key)


def attempt_created(view: Pending, record: dict[str, Any]) -> None:
    _put_attempt(view, attempt_from_record(record["attempt"]))


def attempt_updated(view: Pending, record: dict[str, Any]) -> None:
    _put_attempt(view, attempt_from_record(record["attempt"]))


def attempt_status_changed(view: Pending, record: dict[str, Any]) -> None:
    found = _existing(view, record["rollout_id"], record["attempt_id"])
    if found is None:
        view.ignore(f"no attempt {record['attempt_id']} of rollout {record['rollout_id']}: a status change "
                    f"({record['status']}) for an attempt never created")
        return
    key, attempt = found
    changed = {**attempt, "status": record["status"]}
    if record["end_time"] is not None:
        changed["end_time"] = record["end_time"]
    view.put(key, changed)


def attempt_heartbeat(view: Pending, record: dict[str, Any]) -> None:
    found = _existing(view, record["rollout_id"], record["attempt_id"])
    if found is None:
        view.ignore(f"no attempt {record['attempt_id']} of rollout {record['rollout_id']}: a heartbeat for an "
                    "attempt never created")
        return
    key, attempt = found
    view.put(key, {**attempt, "last_heartbeat_time": record["heartbeat_time"]})

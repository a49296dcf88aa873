"""Folding span events: spans in sequence order, the duplicate index, and per-rollout sequence counters."""

from __future__ import annotations

from typing import Any

from agl_events.events.convert import span_from_record
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def span_added(view: Pending, record: dict[str, Any]) -> None:
    span = span_from_record(record["span"])
    rid, aid, sid, seq = span["rollout_id"], span["attempt_id"], span["span_id"], span["sequence_id"]
    seen = keys.span_seen(rid, aid, sid)
    if view.get(seen) is not None:  # (rollout, attempt, span id) is the primary key: first write wins
        return
    key = keys.span(rid, seq, aid, sid)
    view.create(key, span, "spans")
    view.put(seen, key)
    view.chmax(keys.span_counter(rid), seq)


def span_sequence_reserved(view: Pending, record: dict[str, Any]) -> None:
    view.chmax(keys.span_counter(record["rollout_id"]), record["sequence_id"])

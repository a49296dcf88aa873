"""Folding span events: spans in sequence order, the duplicate index, and per-rollout sequence counters."""

from __future__ import annotations

from agl_events.events.typed import SpanAdded, SpanSequenceReserved, span_model
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def span_added(view: Pending, event: SpanAdded) -> None:
    span = event.span  # a TypedDict: the view stores it as it comes (`events.typed.span`)
    rid, aid, sid, seq = span["rollout_id"], span["attempt_id"], span["span_id"], span["sequence_id"]
    seen = keys.span_seen(rid, aid, sid)
    if view.get(seen) is not None:  # (rollout, attempt, span id) is the primary key: first write wins
        return
    key = keys.span(rid, seq, aid, sid)
    view.create(key, span_model(span), "spans")
    view.put(seen, key)
    view.chmax(keys.span_counter(rid), seq)


def span_sequence_reserved(view: Pending, event: SpanSequenceReserved) -> None:
    view.chmax(keys.span_counter(event.rollout_id), event.sequence_id)

"""Folding span events: spans in sequence order, the duplicate index, and per-rollout sequence counters."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import SpanAdded, SpanKeys, SpanSequenceReserved, span_model
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def span_added(view: Pending, event: SpanAdded) -> None:
    """A span decided here and not logged yet (a command's overlay): kept as the store's span model."""
    _add(view, event.span, span_model(event.span))


def span_logged(view: Pending, span: SpanKeys, value: bytes) -> None:
    """A span read from the log, folded from its keys: the view keeps `value`, the SpanAdded record's bytes as
    the log holds them, and a query decodes them (`views.spans`). No span is decoded or encoded to fold it."""
    _add(view, span, value)


def _add(view: Pending, span: SpanKeys, stored: Any) -> None:
    rid, aid, sid, seq = span["rollout_id"], span["attempt_id"], span["span_id"], span["sequence_id"]
    seen = keys.span_seen(rid, aid, sid)
    if view.get(seen) is not None:  # (rollout, attempt, span id) is the primary key: first write wins
        return
    key = keys.span(rid, seq, aid, sid)  # absent too: it names the span id `seen` indexes
    view.create_new(key, stored, "spans")
    view.put(seen, key)
    view.chmax(keys.span_counter(rid), seq)


def span_sequence_reserved(view: Pending, event: SpanSequenceReserved) -> None:
    view.chmax(keys.span_counter(event.rollout_id), event.sequence_id)

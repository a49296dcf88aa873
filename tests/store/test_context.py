"""What `DecisionContext.emit` makes of a typed event: the log's record, under the kind's key, with the header of
this decision, folded into the context at once; and a span's event, whoever appends it, built in one place."""

from __future__ import annotations

from agl_events.events.codec import AvroCodec
from agl_events.events.typed import SpanAdded, WorkerHeartbeat
from agl_events.reducers import keys
from agl_events.store.commands.spans import add_spans
from agl_events.store.context import INDEX_FROM, DecisionContext
from agl_events.tracer.kafka import span_event
from tests.store import DictView, make_span


def test_an_emitted_event_is_stamped_keyed_by_its_kind_and_folded_at_once() -> None:
    ctx = DecisionContext(DictView(), now=42.0, producer_id="store-1")
    new = ctx.emit(WorkerHeartbeat(worker_id="w-1"))
    assert (new.kind, new.key, new.topic.value) == ("WorkerHeartbeat", "w-1", "workers")
    assert (new.record["time"], new.record["producer_id"], len(new.record["event_id"])) == (42.0, "store-1", 32)
    AvroCodec().encode(new.kind, new.record)  # the record is what the schema wants
    assert ctx.worker("w-1")["last_heartbeat_time"] == 42.0  # type: ignore[index]
    assert ctx.emit(WorkerHeartbeat(worker_id="w-1")).record["event_id"] != new.record["event_id"]


def test_the_store_and_the_tracer_write_the_same_span_record() -> None:
    span = {**make_span("ro-1", "at-1", 1).model_dump(), "attributes": {"ids": (1, 2)}, "kind": "INTERNAL"}
    view = DictView({keys.rollout("ro-1"): {"rollout_id": "ro-1", "status": "running"},
                  keys.attempt_index("ro-1", "at-1"): 1,
                  keys.attempt("ro-1", 1): {"attempt_id": "at-1", "status": "running"}})
    ctx = DecisionContext(view, now=1.0, producer_id="store-1")
    assert add_spans(ctx, [span]) == [0]
    stored = next(e for e in ctx.events if e.kind == "SpanAdded")
    traced = span_event(span, "tracer-1")
    assert stored.record["span"] == traced.record["span"] == SpanAdded.of(span).to_record()["span"]
    assert stored.key == traced.key == "ro-1"
    assert stored.record["span"]["attributes"] == {"values": {"ids": [1, 2]}}  # tuples become lists for Avro


def test_a_scan_through_large_overlays_sees_what_a_filter_of_every_level_sees() -> None:
    """Overlays of INDEX_FROM keys and more are scanned through an index of their prefixes: the same entries, in
    the same order, as a filter, at every depth of prefix, the overlay's entries over the view's."""
    view = DictView({"a/ro-1/0000000001": "view-1", "a/ro-1/0000000009": "view-9", "a/ro-10/0000000001": "other",
                  "s/ro-1/0001/at-1/sp-1": "view-span"})
    root = DecisionContext(view, now=1.0, producer_id="store-1")
    for i in range(INDEX_FROM):
        child = root.child(1.0)
        child.emit(WorkerHeartbeat(worker_id=f"w-{i}"))
        root.absorb(child)
    child = root.child(1.0)
    child.overlay.update({"a/ro-1/0000000002": "batch-2", "s/ro-1/0002/at-1/sp-2": "batch-span"})
    root.absorb(child)
    root.scan("a/")  # the root builds its index here; what it absorbs afterwards is indexed as it comes
    later = root.child(1.0)
    later.overlay.update({"a/ro-1/0000000003": "batch-3", "a/ro-1/0000000009": "batch-9"})
    root.absorb(later)
    command = root.child(1.0)
    assert [v for _, v in command.scan(keys.attempts_of("ro-1"))] == ["view-1", "batch-2", "batch-3", "batch-9"]
    assert [v for _, v in command.scan("s/ro-1/")] == ["view-span", "batch-span"]
    assert [v for _, v in command.scan("s/ro-1/0002/")] == ["batch-span"]
    assert [k for k, _ in command.scan("a/ro-1")] == ["a/ro-1/0000000001", "a/ro-1/0000000002",
                                                      "a/ro-1/0000000003", "a/ro-1/0000000009", "a/ro-10/0000000001"]
    assert len(list(command.scan(keys.WORKERS))) == INDEX_FROM

"""Spans folded from their keys and kept as bytes: the same answers as spans decoded in full to fold them.

A store's reader hands spans over read only as far as their keys (`decode_record(..., fold_only=True)`,
`AvroCodec.leading`); the view keeps the record's bytes and a query decodes them. These cases check the keys
against a full decode, the fallback for a writer schema that does not lead with them, and that a view folded
either way (or written by an older version, spans as JSON) answers the same.
"""

from __future__ import annotations

import copy
import io
from typing import Any

from fastavro import schemaless_writer

from agl_events.events.codec import SINGLE_OBJECT_MARKER, AvroCodec
from agl_events.events.kinds import Kind
from agl_events.events.schemas import EventSchemas, build_event_schema, load_event_schemas
from agl_events.events.typed import SPAN_FOLD_FIELDS, span_model
from agl_events.log.records import LoggedEvent, RawRecord, decode_record
from agl_events.reducers import keys
from agl_events.views.kv import DictKV, KeyValue
from agl_events.views.store_view import StoreView
from tests.reducers.workload import random_run

SCHEMAS = load_event_schemas()


def _raw(value: bytes, offset: int = 0) -> RawRecord:
    return RawRecord("agl.test.spans", 0, offset, b"ro-1", value)


def _spans_of(view: StoreView) -> dict[str, list[dict[str, Any]]]:
    rollouts = {key.split("/")[1] for key, _ in view.scan(keys.SPANS)}
    return {rid: list(view.spans(rid)) for rid in sorted(rollouts)}


async def test_a_span_read_for_folding_carries_its_keys_and_bytes_and_folds_to_the_full_decode() -> None:
    codec = AvroCodec()
    run = await random_run(seed=1)
    spans = [e for e in run.events if e.kind == Kind.SPAN_ADDED]
    assert spans
    for logged in spans:
        assert logged.value is not None
        read = decode_record(codec, _raw(logged.value), fold_only=True)
        full = codec.decode(logged.value).record
        assert read.value == logged.value
        header, span = {k: v for k, v in read.record.items() if k != "span"}, read.record["span"]
        assert header == {k: full[k] for k in ("event_id", "time", "producer_id")}
        # the keys, and what lies before the last of them (the trace id), but nothing of the span beyond
        assert span == {k: full["span"][k] for k in ("rollout_id", "attempt_id", "sequence_id", "trace_id",
                                                     "span_id")}


async def test_a_view_of_span_bytes_answers_as_one_folded_from_full_decodes_and_as_an_old_json_view() -> None:
    """The rebuild-digest property at the view: bytes (fold_only), full records with bytes, and full records
    without bytes (spans kept as JSON, as views written before spans-as-bytes hold them) read back the same."""
    codec = AvroCodec()
    run = await random_run(seed=2)
    as_read = [decode_record(codec, _raw(e.value or b"", e.offset), fold_only=True) for e in run.events]
    as_read = [_at(read, e) for read, e in zip(as_read, run.events, strict=True)]
    as_json = [_at(LoggedEvent(e.kind, e.key, codec.decode(e.value or b"").record, e.topic, e.partition, e.offset), e)
               for e in run.events]
    views: list[KeyValue] = [DictKV(), DictKV(), DictKV()]
    folded = []
    for kv, events in zip(views, (as_read, run.events, as_json), strict=True):
        view = StoreView(kv, track_own=False)
        view.apply_logged(events)
        folded.append(view)
    stored = [v for _, v in folded[0].scan(keys.SPANS)]
    assert stored and all(isinstance(v, bytes) for v in stored)
    assert all(isinstance(v, dict) for _, v in folded[2].scan(keys.SPANS))
    assert _spans_of(folded[0]) == _spans_of(folded[1]) == _spans_of(folded[2])


def _at(read: LoggedEvent, where: LoggedEvent) -> LoggedEvent:
    """`read` at the position `where` has in the log (the test's raw records all claim one partition)."""
    return LoggedEvent(read.kind, read.key, read.record, where.topic, where.partition, where.offset,
                       value=read.value)


def test_a_writer_schema_that_does_not_lead_with_the_keys_is_decoded_in_full_and_still_stored_as_bytes() -> None:
    """An older writer (here: the span id after a union) gets no partial read; its spans fold all the same."""
    schema = copy.deepcopy(SCHEMAS[Kind.SPAN_ADDED].schema)
    fields = schema["fields"][3]["type"]["fields"]
    span_id = next(f for f in fields if f["name"] == "span_id")
    fields.remove(span_id)
    fields.insert([f["name"] for f in fields].index("parent_id") + 1, span_id)
    older = build_event_schema(schema)
    codec = AvroCodec(EventSchemas(SCHEMAS.by_name, {**SCHEMAS.by_fingerprint, older.fingerprint: older}))
    record = _span_record("ro-1", "at-1", 4, "s-1")
    buf = io.BytesIO()
    buf.write(SINGLE_OBJECT_MARKER + older.fingerprint)
    schemaless_writer(buf, older.parsed, record)
    value = buf.getvalue()

    assert codec.leading(value, Kind.SPAN_ADDED, SPAN_FOLD_FIELDS) is None
    read = decode_record(codec, _raw(value), fold_only=True)
    assert read.record["span"]["name"] == record["span"]["name"]  # decoded in full
    view = StoreView(DictKV(), track_own=False, codec=codec)
    view.apply_logged([read])
    assert view.get(keys.span("ro-1", 4, "at-1", "s-1")) == value
    assert list(view.spans("ro-1")) == [span_model(record["span"])]
    assert list(view.spans("ro-1", "at-1")) == list(view.spans("ro-1"))
    assert list(view.spans("ro-1", "at-2")) == []


def _span_record(rid: str, aid: str, seq: int, sid: str) -> dict[str, Any]:
    attributes = {"values": {"text": "héllo ✓", "n": [1, 2]}}
    context = {"trace_id": "t-1", "span_id": sid, "is_remote": False, "trace_state": {}}
    return {"event_id": "e-1", "time": 1.0, "producer_id": "older", "span": {
        "rollout_id": rid, "attempt_id": aid, "sequence_id": seq, "trace_id": "t-1", "span_id": sid,
        "parent_id": None, "name": "ünicode", "status_code": "OK", "status_description": None,
        "attributes": attributes, "events": [], "links": [], "start_time": 1.0, "end_time": 2.0,
        "context": context, "parent": None, "resource_attributes": {"values": {}}, "resource_schema_url": "",
        "extra_json": None}}

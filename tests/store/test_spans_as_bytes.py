"""Spans kept as bytes in the store's view: every span read back equals what was written, whichever way it came.

The store folds a span from its keys and keeps the SpanAdded record's bytes (`reducers.spans.span_logged`);
queries decode them. Three writers put spans into the log: the REST add_span path (the store decides them), the
tracer and the LLM proxy's recorder (straight to the spans topic). Each span here carries what a partial read
could get wrong: unicode, list attributes, events and links with attributes, extra fields with nested values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentlightning.store.client_server import LightningStoreClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.events.kinds import Kind
from agl_events.events.typed import span_model
from agl_events.llm.recorder import SpanRecorder
from agl_events.log.records import EncodedEvent
from agl_events.log.writer import EventWriter
from agl_events.server.client import StoreClient
from agl_events.server.embedded import embedded_store_server
from agl_events.tracer.kafka import span_added, with_route
from agl_events.types import Span
from tests.store import make_span

pytestmark = pytest.mark.kafka

UNICODE = "héllo ✓ 日本語 🚀"


def _rich(rollout_id: str, attempt_id: str, sequence_id: int, name: str) -> Span:
    span = make_span(rollout_id, attempt_id, sequence_id, name=f"{name} {UNICODE}",
                     extra_field={"nested": {"list": [1, {"deep": UNICODE}], "none": None}})
    return Span.model_validate({
        **span.model_dump(),
        "attributes": {"text": UNICODE, "numbers": [1.5, -2.25], "flags": [True, False], "count": 7,
                       "ids": ["a", UNICODE]},
        "events": [{"name": f"event {UNICODE}", "attributes": {"k": [1, 2, 3]}, "timestamp": 1.5}],
        "links": [{"context": span.context.model_dump(), "attributes": {"why": UNICODE}}],
    })


def _otel_span() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span(f"tool {UNICODE}") as otel:
        otel.set_attributes({"text": UNICODE, "numbers": (1.5, 2.5), "flags": (True,), "count": 3})
        otel.add_event(f"event {UNICODE}", {"k": (1, 2)})
    return exporter.get_finished_spans()[0]


async def test_every_span_read_back_equals_what_was_written(settings: Settings, tmp_path: Path) -> None:
    codec = AvroCodec()
    writer = EventWriter(settings.bootstrap_servers, settings.experiment, codec, producer_id="test-writer")
    async with embedded_store_server(settings, tmp_path / "view") as (_, url):
        client = LightningStoreClient(url, retry_delays=(), health_retry_delays=())
        ours = StoreClient(url)
        try:
            rollout = await client.start_rollout(input={"task": UNICODE})
            rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
            written: dict[str, dict[str, Any]] = {}

            rest = _rich(rid, aid, 1, "rest")  # the REST add_span path: decided by the store
            await client.add_span(rest)
            written[rest.span_id] = rest.model_dump()

            proxied = _rich(rid, aid, 2, "proxy")  # the LLM proxy's recorder: straight to the spans topic
            await SpanRecorder(ours, writer).record([proxied.model_dump()])
            written[proxied.span_id] = with_route(proxied.model_dump())

            traced = span_added(_otel_span(), rid, aid, 3, "test-tracer")  # the tracer's event
            await writer.append([EncodedEvent(traced, writer.encode(traced))])
            written[traced.record["span"]["span_id"]] = _model_of(codec, traced.record)

            await client.update_attempt(rid, aid, status="succeeded")  # folds the spans topic first
            read = {s.span_id: s.model_dump() for s in await client.query_spans(rid)}
            assert read == {sid: Span.model_validate(span).model_dump() for sid, span in written.items()}
            assert read[rest.span_id]["attributes"]["text"] == UNICODE
            assert read[rest.span_id]["extra_field"] == {"nested": {"list": [1, {"deep": UNICODE}], "none": None}}
        finally:
            await client.close()
            await ours.close()
            writer.close()


def _model_of(codec: AvroCodec, record: dict[str, Any]) -> dict[str, Any]:
    """The span model of a SpanAdded record as a full decode gives it (what the tracer put on the wire)."""
    return span_model(codec.decode(codec.encode(Kind.SPAN_ADDED, record)).record["span"])

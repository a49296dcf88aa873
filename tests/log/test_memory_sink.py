"""The span writers on the in-memory log, without a broker: the tracer and the LLM proxy's recorder reach the log
only through `EventSink`, so what they append can be read back here exactly as the store's follower would."""

from __future__ import annotations

import asyncio

from agl_events.llm.recorder import SpanRecorder
from agl_events.log.memory import InMemoryLog
from agl_events.semconv import LightningResourceAttributes
from agl_events.server.client import StoreClient
from agl_events.topics import Topic
from agl_events.tracer.kafka import KafkaTracer


def _traced(log: InMemoryLog) -> list[dict[str, object]]:
    """Two nested spans traced for rollout ro-1, attempt at-1, from sequence id 7; the spans as the tracer kept them."""
    tracer = KafkaTracer(log)
    try:
        otel = tracer.get_tracer()
        with (tracer.trace_context("ro-1", "at-1", first_sequence_id=7), otel.start_as_current_span("agent.run"),
              otel.start_as_current_span("llm.call")):
            pass
        return [span.model_dump(mode="json") for span in tracer.get_last_trace()]
    finally:
        tracer.close()


def test_the_tracer_writes_each_span_to_the_span_topic_in_order() -> None:
    log = InMemoryLog(producer_id="tracer-unit")
    kept = _traced(log)
    logged = log.topics[Topic.SPANS.value]
    assert [e.kind for e in logged] == ["SpanAdded", "SpanAdded"]
    assert [e.key for e in logged] == ["ro-1", "ro-1"]  # keyed by rollout: one partition holds a rollout's spans
    assert [e.offset for e in logged] == [0, 1]
    spans = [e.record["span"] for e in logged]
    assert [(s["name"], s["sequence_id"], s["attempt_id"]) for s in spans] == [("llm.call", 7, "at-1"),
                                                                               ("agent.run", 8, "at-1")]
    assert [e.record["producer_id"] for e in logged] == ["tracer-unit", "tracer-unit"]
    assert [s["name"] for s in kept] == ["llm.call", "agent.run"]
    for span in spans:  # the route in the resource too, as upstream's OTLP path stamps it
        resource = span["resource_attributes"]["values"]
        assert resource[LightningResourceAttributes.ROLLOUT_ID.value] == "ro-1"
        assert resource[LightningResourceAttributes.ATTEMPT_ID.value] == "at-1"


def test_the_recorder_appends_a_calls_spans_and_returns_them_as_logged() -> None:
    spans = _traced(InMemoryLog())
    log = InMemoryLog(producer_id="proxy-unit")
    recorder = SpanRecorder(StoreClient("http://127.0.0.1:9"), log)  # `record` never asks the store
    logged = asyncio.run(recorder.record([{**span, "sequence_id": 20 + i} for i, span in enumerate(spans)]))
    assert logged == log.topics[Topic.SPANS.value]
    assert [(e.kind, e.key, e.offset) for e in logged] == [("SpanAdded", "ro-1", 0), ("SpanAdded", "ro-1", 1)]
    assert [e.record["span"]["sequence_id"] for e in logged] == [20, 21]
    assert {e.record["producer_id"] for e in logged} == {"proxy-unit"}

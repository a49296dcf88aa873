"""What the tracer writes for a span equals what Agent Lightning's tracer makes of it, for any span.

The tracer converts a finished OpenTelemetry span straight into the Avro record (`tracer.convert.otel_span_record`),
not through upstream's model, so this checks the two agree on generated spans: every attribute type OpenTelemetry
allows (tuples included), events, links with and without attributes, statuses, trace states, unicode. The spans go
through the real path (the processor's `on_end`, the codec, the in-memory log, which decodes what it stores) and
come back as a store's query returns them (`span_model` of the decoded record); the tracer's own account
(`get_last_trace`) must say the same.
"""

from __future__ import annotations

from typing import Any

from agentlightning.types import Span as UpstreamSpan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan

from agl_events.events.typed import span_model
from agl_events.log.memory import InMemoryLog
from agl_events.semconv import LightningResourceAttributes
from agl_events.topics import Topic
from agl_events.tracer.kafka import KafkaTracer
from tests.tracer import spans


def _upstream(span: ReadableSpan, sequence_id: int) -> dict[str, Any]:
    """Agent Lightning's span of `span`, with the route in the resource as our tracer (and its OTLP path) puts it."""
    model = UpstreamSpan.from_opentelemetry(span, "ro-1", "at-1", sequence_id).model_dump(mode="json")
    model["resource"]["attributes"] |= {LightningResourceAttributes.ROLLOUT_ID.value: "ro-1",
                                        LightningResourceAttributes.ATTEMPT_ID.value: "at-1"}
    return model


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans(), min_size=1, max_size=4))
def test_every_traced_span_reads_back_as_agent_lightnings_tracer_makes_it(otel: list[ReadableSpan]) -> None:
    log = InMemoryLog(producer_id="tracer-unit")
    tracer = KafkaTracer(log)
    try:
        with tracer.trace_context("ro-1", "at-1", first_sequence_id=5):
            for span in otel:
                tracer.processor.on_end(span)
        kept = [span.model_dump(mode="json") for span in tracer.get_last_trace()]
    finally:
        tracer.close()
    expected = [_upstream(span, sequence_id) for sequence_id, span in enumerate(otel, start=5)]
    read = [span_model(logged.record["span"]) for logged in log.topics[Topic.SPANS.value]]
    assert [UpstreamSpan.model_validate(span).model_dump(mode="json") for span in read] == expected
    assert kept == expected

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
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags, TraceState

from agl_events.events.typed import span_model
from agl_events.log.memory import InMemoryLog
from agl_events.semconv import LightningResourceAttributes
from agl_events.topics import Topic
from agl_events.tracer.kafka import KafkaTracer

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # no lone surrogates: not UTF-8
SCALARS = [TEXT, st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False)]
#: What OpenTelemetry allows as an attribute value: a primitive, or a homogeneous sequence (a tuple) of them.
VALUES = st.one_of(*SCALARS, *(st.lists(s, max_size=3).map(tuple) for s in SCALARS))
ATTRIBUTES = st.dictionaries(TEXT, VALUES, max_size=5)
IDS = st.tuples(st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1))
NANOS = st.one_of(st.none(), st.integers(10**15, 2 * 10**18))


@st.composite
def contexts(draw: st.DrawFn) -> SpanContext:
    trace_id, span_id = draw(IDS)
    entry = st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
                      st.from_regex(r"[a-zA-Z0-9]{1,8}", fullmatch=True))
    state = draw(st.lists(entry, max_size=2, unique_by=lambda kv: kv[0]))
    return SpanContext(trace_id, span_id, is_remote=draw(st.booleans()), trace_flags=TraceFlags(TraceFlags.SAMPLED),
                       trace_state=TraceState(state))


@st.composite
def spans(draw: st.DrawFn) -> ReadableSpan:
    code = draw(st.sampled_from(StatusCode))
    return ReadableSpan(
        name=draw(TEXT), context=draw(contexts()), parent=draw(st.one_of(st.none(), contexts())),
        resource=Resource(draw(ATTRIBUTES), schema_url=draw(st.sampled_from(["", "https://example.com/s"]))),
        attributes=draw(ATTRIBUTES),
        events=[Event(name, attributes, timestamp) for name, attributes, timestamp
                in draw(st.lists(st.tuples(TEXT, ATTRIBUTES, st.integers(10**15, 2 * 10**18)), max_size=2))],
        links=[Link(context, attributes) for context, attributes
               in draw(st.lists(st.tuples(contexts(), st.one_of(st.none(), ATTRIBUTES)), max_size=2))],
        status=Status(code, draw(TEXT) if code is StatusCode.ERROR else None),
        start_time=draw(NANOS), end_time=draw(NANOS))


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

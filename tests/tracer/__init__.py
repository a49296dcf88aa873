"""Tests of the tracer's per-span path: an OpenTelemetry span to the record the span topic carries, without a broker.

Here: generated OpenTelemetry spans, every shape the SDK lets an agent make, for the tests that compare paths."""

from __future__ import annotations

from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags, TraceState

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

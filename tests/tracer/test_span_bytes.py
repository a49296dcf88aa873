"""The tracer writes a span's event bytes straight from the OpenTelemetry span (`tracer.span_bytes`): byte for byte
what fastavro writes for the span's record (`tracer.convert.otel_span_record`), for every span the SDK can make,
and the record path still takes what the direct writer does not cover."""

from __future__ import annotations

import enum

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from agl_events.events.codec import AvroCodec
from agl_events.events.kinds import Kind
from agl_events.log.memory import InMemoryLog
from agl_events.topics import Topic
from agl_events.tracer.convert import otel_span_record
from agl_events.tracer.kafka import KafkaTracer, record_event
from agl_events.tracer.span_bytes import SPAN_ADDED_FINGERPRINT, AttemptSpans, NotCovered
from tests.tracer import spans

CODEC = AvroCodec()


def _record_path(span: ReadableSpan, sequence_id: int, event_id: str, time: float) -> bytes:
    """The event's bytes as the record path makes them, with the given header."""
    new = record_event(otel_span_record(span, "ro-1", "at-1", sequence_id), "tracer-1")
    return CODEC.encode(Kind.SPAN_ADDED, {**new.record, "event_id": event_id, "time": time})


def test_the_direct_writer_is_for_the_span_schema_of_the_contract() -> None:
    assert CODEC.schemas[Kind.SPAN_ADDED].fingerprint.hex() == SPAN_ADDED_FINGERPRINT, (
        "schemas/SpanAdded.avsc (or a type it names) changed: update tracer/span_bytes.py to write it, then its "
        "fingerprint")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans(), min_size=1, max_size=4), st.integers(1, 2**40), st.floats(0, 2e9))
def test_every_span_is_written_as_fastavro_writes_its_record(otel: list[ReadableSpan], first: int,
                                                             time: float) -> None:
    writer = AttemptSpans(CODEC.header(Kind.SPAN_ADDED), "ro-1", "at-1", "tracer-1")
    for sequence_id, span in enumerate(otel + otel[:1], start=first):  # a resource seen before, after another
        assert writer.event(span, sequence_id, "e" * 32, time) == _record_path(span, sequence_id, "e" * 32, time)


@pytest.mark.parametrize("size", [0, 63, 64, 127, 128, 4095, 4096, 20_000])
def test_text_of_every_length_class_is_written_as_fastavro_writes_it(size: int) -> None:
    """Lengths come from a table below 4,096 bytes and are computed past it; keys, values and list items alike,
    multi-byte characters counted in bytes."""
    text = ("é" * size)[: size // 2] + "x" * (size - 2 * (size // 2))  # `size` bytes of UTF-8
    span = _span_with(**{text or "k": text, "k" * size or "k2": (text, "ok")})
    writer = AttemptSpans(CODEC.header(Kind.SPAN_ADDED), "ro-1", "at-1", "tracer-1")
    assert writer.event(span, 1, "e" * 32, 1.0) == _record_path(span, 1, "e" * 32, 1.0)


class Level(enum.IntEnum):
    HIGH = 2


def _span_with(**attributes: object) -> ReadableSpan:
    return ReadableSpan(name="odd", context=SpanContext(1, 2, False, TraceFlags(TraceFlags.SAMPLED)),
                        resource=Resource({}), attributes=attributes)


@pytest.mark.parametrize("value", [Level.HIGH, 2**70, (1, Level.HIGH)],
                         ids=["int subclass", "past 64 bits", "in a list"])
def test_values_the_writer_does_not_cover_take_the_record_path(value: object) -> None:
    span = _span_with(value=value)
    with pytest.raises(NotCovered):
        AttemptSpans(CODEC.header(Kind.SPAN_ADDED), "ro-1", "at-1", "tracer-1").event(span, 1, "e" * 32, 1.0)
    log = InMemoryLog(producer_id="tracer-1")
    tracer = KafkaTracer(log)
    with tracer.trace_context("ro-1", "at-1", first_sequence_id=3):
        tracer.processor.on_end(span)
    tracer.close()
    (logged,) = log.topics[Topic.SPANS.value]
    header = logged.record
    assert logged.value == _record_path(span, 3, header["event_id"], header["time"])
    assert logged.record["span"]["attributes"]["values"]["value"] == CODEC.decode(
        _record_path(span, 3, "e" * 32, 1.0)).record["span"]["attributes"]["values"]["value"]


@pytest.mark.parametrize(("trace_id", "span_id"), [(0, 0), (2**128 - 1, 2**64 - 1), (2**128, 2**64), (-5, -7),
                                                   (2**130, 3), (3, 2**70)])
def test_ids_in_and_out_of_range_are_written_as_fastavro_writes_them(trace_id: int, span_id: int) -> None:
    """Ids in range are written in one piece (their hex has a fixed length); others, which OpenTelemetry does not
    make, the general way: of the span, of its parent, and of both as context records."""
    parent = SpanContext(trace_id, span_id, True, TraceFlags(TraceFlags.SAMPLED))
    span = ReadableSpan(name="ids", context=SpanContext(trace_id, span_id + 1, False, TraceFlags(TraceFlags.SAMPLED)),
                        parent=parent, resource=Resource({}))
    writer = AttemptSpans(CODEC.header(Kind.SPAN_ADDED), "ro-1", "at-1", "tracer-1")
    assert writer.event(span, 1, "e" * 32, 1.0) == _record_path(span, 1, "e" * 32, 1.0)

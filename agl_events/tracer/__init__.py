"""Tracing agents into Kafka: `KafkaTracer` turns finished OpenTelemetry spans into SpanAdded events."""

from agl_events.tracer.convert import span_from_otel
from agl_events.tracer.kafka import KafkaSpanProcessor, KafkaTracer, ReservedIds, SpanFlushError, TraceContext

__all__ = ["KafkaSpanProcessor", "KafkaTracer", "ReservedIds", "SpanFlushError", "TraceContext", "span_from_otel"]

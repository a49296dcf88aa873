"""Tests of the tracer's per-span path: an OpenTelemetry span to the record the span topic carries, without a broker."""

"""Where emitted spans go: the tracer provider of the active KafkaTracer attempt, else the global one.

Upstream's emitters ask the active agentlightning `Tracer`; ours speak plain OpenTelemetry, so any
SDK TracerProvider works (an in-memory exporter in tests, an OTLP exporter elsewhere). A KafkaTracer
registers its provider here for the length of a `trace_context`, which lets emitters reach it even
when the process's global provider belongs to someone else (OpenTelemetry allows setting it once).
The registration is process-wide, not a contextvar, so spans from worker threads still land.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from opentelemetry import trace
from pydantic import BaseModel

from agl_events.types import TraceStatus

INSTRUMENTATION_NAME = "agentlightning"

_lock = threading.Lock()
_active: trace.TracerProvider | None = None


class SpanCoreFields(BaseModel):
    """What an emitter recorded (upstream's `SpanCoreFields`): enough to rebuild the span elsewhere."""

    name: str
    status: TraceStatus
    attributes: dict[str, Any]
    start_time: float | None
    end_time: float | None


def set_active_provider(provider: trace.TracerProvider | None) -> trace.TracerProvider | None:
    """Make `provider` the emitters' target; returns the previous one so callers can restore it."""
    global _active
    with _lock:
        previous, _active = _active, provider
    return previous


def active_provider() -> trace.TracerProvider:
    """The provider emitters use; RuntimeError when nothing would record the span (as upstream)."""
    provider = _active
    if provider is not None:
        return provider
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.NoOpTracerProvider | trace.ProxyTracerProvider):  # the proxy: none set yet
        raise RuntimeError("No active tracer found: enter a KafkaTracer.trace_context or set an OpenTelemetry "
                           "SDK TracerProvider before emitting spans.")
    return provider


def get_otel_tracer() -> trace.Tracer:
    return _tracer_of(active_provider())


@functools.lru_cache(maxsize=16)
def _tracer_of(provider: trace.TracerProvider) -> trace.Tracer:
    """One tracer per provider: building a new one for every emitted span cost more than the span itself."""
    return trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=provider)


def to_otel_status(status: TraceStatus) -> trace.StatusCode:
    return {"UNSET": trace.StatusCode.UNSET, "ERROR": trace.StatusCode.ERROR}.get(status.status_code,
                                                                                 trace.StatusCode.OK)


def seconds(nanos: int | None) -> float | None:
    """OpenTelemetry nanoseconds to store seconds, with upstream's tolerance for values already in seconds."""
    if not nanos:
        return None
    return nanos / 1_000_000_000 if nanos > 1e12 else nanos


def core_fields(span: trace.Span, name: str, attributes: dict[str, Any]) -> SpanCoreFields:
    """The recorded fields of a finished SDK span (ReadableSpan), or of what was asked when not recording."""
    status = getattr(span, "status", None)
    if status is not None and hasattr(span, "start_time"):
        return SpanCoreFields(
            name=name,
            attributes=dict(getattr(span, "attributes", None) or {}),
            start_time=seconds(span.start_time),  # type: ignore[attr-defined]
            end_time=seconds(span.end_time),  # type: ignore[attr-defined]
            status=TraceStatus(status_code=status.status_code.name, description=status.description),
        )
    now = time.time()
    return SpanCoreFields(name=name, attributes=attributes, start_time=now, end_time=now,
                          status=TraceStatus(status_code="UNSET"))


def create_span(name: str, attributes: dict[str, Any], status: TraceStatus | None = None,
                propagate: bool = True) -> SpanCoreFields:
    """Start and end one span at once (upstream `Tracer.create_span`); propagate=False records nothing."""
    if not propagate:
        now = time.time()
        return SpanCoreFields(name=name, attributes=attributes, start_time=now, end_time=now,
                              status=status or TraceStatus(status_code="UNSET"))
    span = get_otel_tracer().start_span(name, attributes=attributes)
    if status is not None:
        span.set_status(to_otel_status(status), status.description)
    span.end()
    return core_fields(span, name, attributes)

"""A finished OpenTelemetry span as our `Span`: a port of upstream's `Span.from_opentelemetry`.

Ids become lowercase hex, nanoseconds become seconds, attribute tuples become lists (what the log gives
back). Instance fields the model does not name travel as JSON-safe extra fields, as upstream keeps them:
none for the ReadableSpan snapshots a processor's on_end receives; kind, scope and the like for live
SDK spans an agent returns.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from agl_events.emitter.spans import seconds
from agl_events.types import Span

SPAN_OWN_FIELDS = ["name", "context", "parent", "resource", "attributes", "events", "links", "start_time",
                   "end_time", "status", "span_processor", "rollout_id", "attempt_id", "trace_id", "span_id",
                   "parent_id"]


def extra_fields(src: Any, excluded: list[str]) -> dict[str, Any]:
    """Public-looking instance fields not modelled explicitly, JSON-safe (str() for the rest), as upstream."""
    skip = set(excluded) | {"_" + k for k in excluded} | set(type(src).__dict__.keys())
    fields = {k.lstrip("_"): v for k, v in getattr(src, "__dict__", {}).items()}
    kept = {k: v for k, v in fields.items() if k not in skip and not k.startswith("_")}
    return json.loads(json.dumps(kept, default=str)) if kept else {}  # usually empty: skip the round trip


def plain(attributes: Any) -> dict[str, Any]:
    """Attributes as a dict with lists, not OpenTelemetry's tuples: equal to what comes back from the log."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (attributes or {}).items()}


def untupled(value: Any) -> Any:
    """Tuples (OpenTelemetry's attribute sequences) as lists: fastavro reads a tuple as (union branch, value)."""
    if isinstance(value, dict):
        return {k: untupled(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [untupled(v) for v in value]
    return value


def context_of(ctx: trace.SpanContext) -> dict[str, Any]:
    return {
        "trace_id": trace.format_trace_id(ctx.trace_id),
        "span_id": trace.format_span_id(ctx.span_id),
        "is_remote": ctx.is_remote,
        "trace_state": dict(ctx.trace_state.items()) if ctx.trace_state else {},
        **extra_fields(ctx, ["trace_id", "span_id", "is_remote", "trace_state"]),
    }


def otel_span_dict(src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int) -> dict[str, Any]:
    """Convert `src` into the JSON shape of our `Span` (what `Span.model_dump()` gives), stamped with where it
    belongs and its place in the rollout's order. Plain dicts, no model: the tracer runs this for every
    span on the agent's thread, and validating a pydantic model there cost about as much as encoding."""
    ctx = src.get_span_context()
    trace_id, span_id = (ctx.trace_id, ctx.span_id) if ctx is not None else (0, 0)
    status = src.status
    return {
        "rollout_id": rollout_id,
        "attempt_id": attempt_id,
        "sequence_id": sequence_id,
        "trace_id": trace.format_trace_id(trace_id),
        "span_id": trace.format_span_id(span_id),
        "parent_id": trace.format_span_id(src.parent.span_id) if src.parent else None,
        "name": src.name,
        "status": {"status_code": status.status_code.name, "description": status.description,
                   **extra_fields(status, ["status_code", "description"])},
        "attributes": plain(src.attributes),
        "events": [{"name": e.name, "attributes": plain(e.attributes), "timestamp": seconds(e.timestamp),
                    **extra_fields(e, ["name", "attributes", "timestamp"])} for e in src.events],
        "links": [{"context": context_of(link.context),
                   "attributes": plain(link.attributes) if link.attributes else None,
                   **extra_fields(link, ["context", "attributes"])} for link in src.links],
        "start_time": seconds(src.start_time),
        "end_time": seconds(src.end_time),
        "context": context_of(ctx) if ctx is not None else None,
        "parent": context_of(src.parent) if src.parent else None,
        "resource": {"attributes": plain(src.resource.attributes), "schema_url": src.resource.schema_url or ""},
        **extra_fields(src, SPAN_OWN_FIELDS),
    }


def span_from_otel(src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int) -> Span:
    """`otel_span_dict` as our model."""
    return Span.model_validate(otel_span_dict(src, rollout_id, attempt_id, sequence_id))

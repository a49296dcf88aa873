"""A finished OpenTelemetry span as the record the span topic carries: a port of upstream's `Span.from_opentelemetry`.

Ids become lowercase hex, nanoseconds become seconds, attribute tuples become lists (fastavro reads a tuple as
(union branch, value)). The span goes straight into the Avro `Span` record (`events.typed.span`), with no span
model or model-shaped dict in between: the tracer runs this for every span an agent ends, and building the
model's dict, then the record from it, cost more than encoding the result. Instance fields the model does not
name travel in `extra_json`, as upstream keeps them: none for the ReadableSpan snapshots a processor's on_end
receives; kind, scope and the like for live SDK spans an agent returns.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from agl_events.emitter.spans import seconds
from agl_events.events.jsontext import dumps
from agl_events.events.typed import Attributes, SpanContext, span_model
from agl_events.events.typed import Span as SpanRecord
from agl_events.semconv import LightningResourceAttributes
from agl_events.types import Span

SPAN_OWN_FIELDS = ("name", "context", "parent", "resource", "attributes", "events", "links", "start_time",
                   "end_time", "status", "span_processor", "rollout_id", "attempt_id", "trace_id", "span_id",
                   "parent_id")
ROLLOUT_ID = LightningResourceAttributes.ROLLOUT_ID.value
ATTEMPT_ID = LightningResourceAttributes.ATTEMPT_ID.value


@functools.lru_cache(maxsize=64)
def _kept_names(kind: type, names: tuple[str, ...], excluded: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(instance key, field name) of the instance fields `extra_fields` keeps, worked out once per class and set of
    instance keys: every span of a run has the same ones, and the set arithmetic cost more than the rest."""
    skip = set(excluded) | {"_" + k for k in excluded} | set(kind.__dict__.keys())
    return tuple((key, key.lstrip("_")) for key in names
                 if key.lstrip("_") not in skip and not key.lstrip("_").startswith("_"))


def extra_fields(src: Any, excluded: tuple[str, ...]) -> dict[str, Any]:
    """Public-looking instance fields not modelled explicitly, JSON-safe (str() for the rest), as upstream."""
    fields: dict[str, Any] = getattr(src, "__dict__", {})
    kept = {name: fields[key] for key, name in _kept_names(type(src), tuple(fields), excluded)}
    return json.loads(json.dumps(kept, default=str)) if kept else {}  # usually empty: skip the round trip


def attributes_record(attributes: Mapping[str, Any] | None) -> Attributes:
    """OpenTelemetry attributes as the record holds them: lists, not OpenTelemetry's tuples."""
    return {"values": {k: list(v) if isinstance(v, tuple) else v for k, v in (attributes or {}).items()}}


def untupled(value: Any) -> Any:
    """Tuples (OpenTelemetry's attribute sequences) as lists: fastavro reads a tuple as (union branch, value)."""
    if isinstance(value, dict):
        return {k: untupled(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [untupled(v) for v in value]
    return value


def context_record(ctx: trace.SpanContext) -> SpanContext:
    return {"trace_id": trace.format_trace_id(ctx.trace_id), "span_id": trace.format_span_id(ctx.span_id),
            "is_remote": bool(ctx.is_remote),
            "trace_state": dict(ctx.trace_state.items()) if ctx.trace_state else {}}


def otel_span_record(src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int,
                     route: bool = True) -> SpanRecord:
    """The span record of `src`, stamped with where it belongs and its place in the rollout's order; with `route`
    the rollout and attempt ids go into the resource as well, as upstream's OTLP path stamps them there."""
    ctx = src.get_span_context()
    parent = src.parent
    status = src.status
    resource = src.resource
    resource_attributes = attributes_record(resource.attributes)
    if route:
        resource_attributes["values"][ROLLOUT_ID] = rollout_id
        resource_attributes["values"][ATTEMPT_ID] = attempt_id
    extra = extra_fields(src, SPAN_OWN_FIELDS)
    return {
        "rollout_id": rollout_id,
        "attempt_id": attempt_id,
        "sequence_id": sequence_id,
        "trace_id": trace.format_trace_id(ctx.trace_id if ctx is not None else 0),
        "span_id": trace.format_span_id(ctx.span_id if ctx is not None else 0),
        "parent_id": trace.format_span_id(parent.span_id) if parent else None,
        "name": src.name,
        "status_code": status.status_code.name,
        "status_description": status.description,
        "attributes": attributes_record(src.attributes),
        "events": [{"name": e.name, "attributes": attributes_record(e.attributes), "timestamp": seconds(e.timestamp)}
                   for e in src.events],
        "links": [{"context": context_record(link.context),
                   "attributes": attributes_record(link.attributes) if link.attributes else None}
                  for link in src.links],
        "start_time": seconds(src.start_time),
        "end_time": seconds(src.end_time),
        "context": context_record(ctx) if ctx is not None else None,
        "parent": context_record(parent) if parent else None,
        "resource_attributes": resource_attributes,
        "resource_schema_url": resource.schema_url or "",
        "extra_json": dumps(extra) if extra else None,
    }


def span_from_otel(src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int) -> Span:
    """`src` as our span model (upstream's `Span.from_opentelemetry`: no route in the resource)."""
    return Span.model_validate(span_model(otel_span_record(src, rollout_id, attempt_id, sequence_id, route=False)))

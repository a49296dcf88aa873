"""A span as the contract carries it (`schemas/types/Span.avsc`), and its parts: TypedDicts, not dataclasses.

Typed for readers (and checked against the schema, `tests/events/test_typed.py`), but plain dicts at run time:
folding a span is the hot path of every store and processor, and building a frozen dataclass of a span's 19
fields cost a quarter of that fold (`python -m tests.reducers.bench_fold`), where the reducer reads four ids
and stores the rest as it comes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import orjson

from agl_events.events.jsontext import dumps

#: The keys of the store's span model the record holds in fields of its own; any other goes to `extra_json`.
SPAN_FIELDS = {"rollout_id", "attempt_id", "sequence_id", "trace_id", "span_id", "parent_id", "name", "status",
               "attributes", "events", "links", "start_time", "end_time", "context", "parent", "resource"}

AttributeScalar = str | bool | int | float
AttributeValue = AttributeScalar | list[AttributeScalar]


class Attributes(TypedDict):
    """OpenTelemetry attributes: flat keys, primitive values or homogeneous lists of primitives."""

    values: dict[str, AttributeValue]


class SpanContext(TypedDict):
    trace_id: str
    span_id: str
    is_remote: bool
    trace_state: dict[str, str]


class SpanEvent(TypedDict):
    name: str
    attributes: Attributes
    timestamp: float | None


class SpanLink(TypedDict):
    context: SpanContext
    attributes: Attributes | None


def _attrs(values: Mapping[str, Any] | None) -> Attributes | None:
    """OpenTelemetry keeps list attributes as tuples; Avro (fastavro) wants lists."""
    if values is None:
        return None
    return {"values": {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}}


def _values(attributes: Attributes | None) -> dict[str, AttributeValue] | None:
    return None if attributes is None else attributes["values"]


def _context(ctx: Mapping[str, Any] | None) -> SpanContext | None:
    if ctx is None:
        return None
    return {"trace_id": ctx["trace_id"], "span_id": ctx["span_id"], "is_remote": bool(ctx.get("is_remote")),
            "trace_state": dict(ctx.get("trace_state") or {})}


class SpanKeys(TypedDict):
    """What folding a span reads of it: where it goes in the view and whether it is there already."""

    rollout_id: str
    attempt_id: str
    sequence_id: int
    span_id: str


#: What a fold reads of a SpanAdded record: the event's header and the span's keys, all at the front of the record
#: (paths for `AvroCodec.leading`), so a store folds a span without decoding it and keeps its bytes.
SPAN_FOLD_FIELDS = frozenset({("event_id",), ("time",), ("producer_id",), ("span", "rollout_id"),
                              ("span", "attempt_id"), ("span", "sequence_id"), ("span", "span_id")})


class Span(TypedDict):
    """An OpenTelemetry span stamped with its rollout, attempt and per-rollout sequence id."""

    rollout_id: str
    attempt_id: str
    sequence_id: int
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    status_code: str
    status_description: str | None
    attributes: Attributes
    events: list[SpanEvent]
    links: list[SpanLink]
    start_time: float | None
    end_time: float | None
    context: SpanContext | None
    parent: SpanContext | None
    resource_attributes: Attributes
    resource_schema_url: str
    extra_json: str | None


def span_of(span: Mapping[str, Any]) -> Span:
    """The record of a span in the store's model shape (`Span.model_dump()`); fields beyond the model's go to
    extra_json, as upstream keeps them."""
    extra = {k: v for k, v in span.items() if k not in SPAN_FIELDS}
    status = span["status"]
    return {
        "rollout_id": span["rollout_id"],
        "attempt_id": span["attempt_id"],
        "sequence_id": span["sequence_id"],
        "trace_id": span["trace_id"],
        "span_id": span["span_id"],
        "parent_id": span["parent_id"],
        "name": span["name"],
        "status_code": status["status_code"],
        "status_description": status.get("description"),
        "attributes": _attrs(span["attributes"]),  # type: ignore[typeddict-item]  # never None in the model
        "events": [{"name": e["name"], "attributes": _attrs(e["attributes"]),  # type: ignore[typeddict-item]
                    "timestamp": e.get("timestamp")} for e in span["events"]],
        "links": [{"context": _context(link["context"]),  # type: ignore[typeddict-item]
                   "attributes": _attrs(link.get("attributes"))} for link in span["links"]],
        "start_time": span["start_time"],
        "end_time": span["end_time"],
        "context": _context(span["context"]),
        "parent": _context(span["parent"]),
        "resource_attributes": _attrs(span["resource"]["attributes"]),  # type: ignore[typeddict-item]
        "resource_schema_url": span["resource"]["schema_url"],
        "extra_json": dumps(extra) if extra else None,
    }


def span_model(record: Span) -> dict[str, Any]:
    """The store's span model of a record, as the view holds it and queries return it."""
    span = {
        "rollout_id": record["rollout_id"],
        "attempt_id": record["attempt_id"],
        "sequence_id": record["sequence_id"],
        "trace_id": record["trace_id"],
        "span_id": record["span_id"],
        "parent_id": record["parent_id"],
        "name": record["name"],
        "status": {"status_code": record["status_code"], "description": record["status_description"]},
        "attributes": _values(record["attributes"]),
        "events": [{"name": e["name"], "attributes": _values(e["attributes"]), "timestamp": e["timestamp"]}
                   for e in record["events"]],
        "links": [{"context": link["context"], "attributes": _values(link["attributes"])}
                  for link in record["links"]],
        "start_time": record["start_time"],
        "end_time": record["end_time"],
        "context": record["context"],
        "parent": record["parent"],
        "resource": {"attributes": _values(record["resource_attributes"]),
                     "schema_url": record["resource_schema_url"]},
    }
    if record["extra_json"]:
        span.update(orjson.loads(record["extra_json"]))
    return span

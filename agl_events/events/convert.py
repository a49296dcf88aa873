"""Between the store's models (JSON-shaped dicts) and the Avro records of the contract.

Arbitrary JSON (task input, metadata, resources, heartbeat stats, extra span fields) travels as JSON
text inside the records, so the schemas stay stable while users put anything they like in them.
"""

from __future__ import annotations

from typing import Any

import orjson

SPAN_FIELDS = {"rollout_id", "attempt_id", "sequence_id", "trace_id", "span_id", "parent_id", "name", "status",
               "attributes", "events", "links", "start_time", "end_time", "context", "parent", "resource"}


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def loads_optional(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def rollout_record(rollout: dict[str, Any]) -> dict[str, Any]:
    return {
        "rollout_id": rollout["rollout_id"],
        "input_json": dumps(rollout["input"]),
        "start_time": rollout["start_time"],
        "end_time": rollout["end_time"],
        "mode": rollout["mode"],
        "resources_id": rollout["resources_id"],
        "status": rollout["status"],
        "config": rollout["config"],
        "metadata_json": None if rollout["metadata"] is None else dumps(rollout["metadata"]),
    }


def rollout_from_record(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "rollout_id": record["rollout_id"],
        "input": orjson.loads(record["input_json"]),
        "start_time": record["start_time"],
        "end_time": record["end_time"],
        "mode": record["mode"],
        "resources_id": record["resources_id"],
        "status": record["status"],
        "config": dict(record["config"]),
        "metadata": loads_optional(record["metadata_json"]),
    }


def attempt_record(attempt: dict[str, Any]) -> dict[str, Any]:
    record = {k: v for k, v in attempt.items() if k != "metadata"}
    record["metadata_json"] = None if attempt["metadata"] is None else dumps(attempt["metadata"])
    return record


def attempt_from_record(record: dict[str, Any]) -> dict[str, Any]:
    attempt = {k: v for k, v in record.items() if k != "metadata_json"}
    attempt["metadata"] = loads_optional(record["metadata_json"])
    return attempt


def _attrs(values: dict[str, Any] | None) -> dict[str, Any] | None:
    """OpenTelemetry keeps list attributes as tuples; Avro (fastavro) wants lists."""
    if values is None:
        return None
    return {"values": {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}}


def _context(ctx: dict[str, Any] | None) -> dict[str, Any] | None:
    if ctx is None:
        return None
    return {"trace_id": ctx["trace_id"], "span_id": ctx["span_id"], "is_remote": bool(ctx.get("is_remote")),
            "trace_state": dict(ctx.get("trace_state") or {})}


def span_record(span: dict[str, Any]) -> dict[str, Any]:
    """A span model dump as a Span record; fields beyond the model's go to extra_json, as upstream keeps them."""
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
        "attributes": _attrs(span["attributes"]),
        "events": [{"name": e["name"], "attributes": _attrs(e["attributes"]), "timestamp": e.get("timestamp")}
                   for e in span["events"]],
        "links": [{"context": _context(link["context"]), "attributes": _attrs(link.get("attributes"))}
                  for link in span["links"]],
        "start_time": span["start_time"],
        "end_time": span["end_time"],
        "context": _context(span["context"]),
        "parent": _context(span["parent"]),
        "resource_attributes": _attrs(span["resource"]["attributes"]),
        "resource_schema_url": span["resource"]["schema_url"],
        "extra_json": dumps(extra) if extra else None,
    }


def span_from_record(record: dict[str, Any]) -> dict[str, Any]:
    def attrs(value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else value["values"]

    span = {
        "rollout_id": record["rollout_id"],
        "attempt_id": record["attempt_id"],
        "sequence_id": record["sequence_id"],
        "trace_id": record["trace_id"],
        "span_id": record["span_id"],
        "parent_id": record["parent_id"],
        "name": record["name"],
        "status": {"status_code": record["status_code"], "description": record["status_description"]},
        "attributes": attrs(record["attributes"]),
        "events": [{"name": e["name"], "attributes": attrs(e["attributes"]), "timestamp": e["timestamp"]}
                   for e in record["events"]],
        "links": [{"context": link["context"], "attributes": attrs(link["attributes"])} for link in record["links"]],
        "start_time": record["start_time"],
        "end_time": record["end_time"],
        "context": record["context"],
        "parent": record["parent"],
        "resource": {"attributes": attrs(record["resource_attributes"]), "schema_url": record["resource_schema_url"]},
    }
    if record["extra_json"]:
        span.update(orjson.loads(record["extra_json"]))
    return span


def resources_record(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in snapshot.items() if k != "resources"} | {"resources_json": dumps(snapshot["resources"])}


def resources_from_record(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "resources_json"} | {
        "resources": orjson.loads(record["resources_json"])
    }

"""A task-requests record's value as a request: JSON, or Avro `TaskRequested` (single-object or Confluent
wire format). Apart from `events.task_request` because it needs the codec, which the pure layers may not import.
"""

from __future__ import annotations

import orjson

from agl_events.events.codec import CONFLUENT_MAGIC, AvroCodec, CodecError
from agl_events.events.kinds import Kind
from agl_events.events.task_request import InvalidTaskRequest, TaskRequest, parse_json, validate_request
from agl_events.events.typed import TaskRequested
from agl_events.types import EnqueueRolloutRequest

#: The first byte of a single-object Avro encoding (c3 01); a JSON object starts with `{` (or whitespace).
_AVRO_MARKERS = (b"\xc3", CONFLUENT_MAGIC)


def decode_task_request(codec: AvroCodec, value: bytes | None) -> TaskRequest:
    """A record's value as a request: Avro when framed as Avro, else JSON."""
    if not value:
        raise InvalidTaskRequest("empty value")
    if not value.startswith(_AVRO_MARKERS):
        return parse_json(value)
    try:
        decoded = codec.decode(value)
    except CodecError as exc:
        raise InvalidTaskRequest(f"not a TaskRequested record: {exc}") from None
    if decoded.name != Kind.TASK_REQUESTED:
        raise InvalidTaskRequest(f"expected a TaskRequested record, got {decoded.name}")
    request = TaskRequested.from_record(decoded.record)
    try:
        fields = {"input": orjson.loads(request.input_json), "mode": request.mode,
                  "resources_id": request.resources_id,
                  "config": orjson.loads(request.config_json) if request.config_json else None,
                  "metadata": orjson.loads(request.metadata_json) if request.metadata_json else None}
    except orjson.JSONDecodeError as exc:
        raise InvalidTaskRequest(f"a TaskRequested *_json field is not JSON: {exc}") from None
    return validate_request(fields)


def encode_avro(codec: AvroCodec, request: EnqueueRolloutRequest) -> bytes:
    """A request as a TaskRequested record (for producers that prefer Avro, and for tests)."""
    config = request.config.model_dump(mode="json") if request.config is not None else None
    requested = TaskRequested(
        input_json=orjson.dumps(request.input).decode(), mode=request.mode, resources_id=request.resources_id,
        config_json=orjson.dumps(config).decode() if config is not None else None,
        metadata_json=orjson.dumps(request.metadata).decode() if request.metadata is not None else None,
    )
    return codec.encode(requested.kind, requested.to_record())

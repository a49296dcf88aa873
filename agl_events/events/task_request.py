"""The record contract of the task-requests topic: what any Kafka client may write to ask for a rollout.

A value is either a JSON object shaped as Agent Lightning's enqueue request (`input`, and optionally `mode`,
`resources_id`, `config`, `metadata`; schemas/json/task-request.schema.json) or an Avro `TaskRequested`
record in this project's framing (single-object or Confluent wire format). The record key is the
producer's idempotency key.

This module holds the request model and its validation, pure (the store's commands use it); decoding
record bytes, Avro included, is `events.task_record`, so the store and `produce tasks` refuse the same records.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ConfigDict, ValidationError

from agl_events.types import EnqueueRolloutRequest


class TaskRequest(EnqueueRolloutRequest):
    """One task request: an enqueue request, with unknown keys refused (they are likely typos)."""

    model_config = ConfigDict(extra="forbid")


class InvalidTaskRequest(ValueError):
    """A task-request record that is neither a valid JSON request nor a TaskRequested record."""


def validate_request(data: Any) -> TaskRequest:
    """A decoded JSON value as a request; raises InvalidTaskRequest saying which fields are wrong."""
    if not isinstance(data, dict):
        raise InvalidTaskRequest(f"expected a JSON object, got {type(data).__name__}")
    try:
        return TaskRequest.model_validate(data)
    except ValidationError as exc:
        raise InvalidTaskRequest("; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
                                           for e in exc.errors())) from None


def parse_json(text: bytes | str) -> TaskRequest:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidTaskRequest(f"not JSON: {exc}") from None
    return validate_request(data)

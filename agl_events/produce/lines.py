"""JSON lines as keyed task requests, and the report of a produce run. Pure: no Kafka, no HTTP.

Each line is one object shaped as Agent Lightning's enqueue request: `input`, and optionally `mode`,
`resources_id`, `config` (a RolloutConfig) and `metadata`. Its idempotency key (the task-requests record key,
which the store enqueues at most once) is a field of the line (`key_field`, a dotted path such as `id` or
`metadata.task_id`) or, by default, a hash of the line: producing a file twice then enqueues nothing twice,
and two identical lines are one task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from agl_events.events.task_request import InvalidTaskRequest, TaskRequest, validate_request


@dataclass(frozen=True)
class TaskLine:
    """A valid line: its number in the file, its idempotency key and the request it asks for."""

    number: int
    key: str
    request: TaskRequest


@dataclass
class ProduceReport:
    lines: int = 0
    #: Rollouts enqueued (through the store) or records acknowledged by Kafka (straight to the topic).
    accepted: int = 0
    #: (line number, why) for lines that are not task requests.
    rejected: list[tuple[int, str]] = field(default_factory=list)
    #: (line number, the delivery error) for valid lines Kafka did not take.
    failed: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.rejected and not self.failed


def line_key(line: str) -> str:
    """The default idempotency key: a hash of the line, blanks around it ignored."""
    return hashlib.sha256(line.strip().encode()).hexdigest()[:32]


def split_key(data: dict[str, Any], key_field: str) -> tuple[str, dict[str, Any]]:
    """The key at dotted path `key_field`, and the request without it where it is only the key.

    A top-level field that is no request field (`id`) is taken out, since requests refuse unknown keys;
    one inside the request (`metadata.task_id`) stays where it is.
    """
    node: Any = data
    for part in key_field.split("."):
        if not isinstance(node, dict) or part not in node:
            raise InvalidTaskRequest(f"no key field {key_field!r}")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, str | int) or node == "":
        raise InvalidTaskRequest(f"key field {key_field!r} must be a non-empty string or an integer, got {node!r}")
    if "." not in key_field and key_field not in TaskRequest.model_fields:
        data = {name: value for name, value in data.items() if name != key_field}
    return str(node), data


def parse_line(number: int, line: str, key_field: str | None = None) -> TaskLine:
    """One line as a keyed request; raises InvalidTaskRequest saying what is wrong with it."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise InvalidTaskRequest(f"not JSON: {exc}") from None
    if key_field is None:
        return TaskLine(number, line_key(line), validate_request(data))
    if not isinstance(data, dict):
        raise InvalidTaskRequest(f"expected a JSON object, got {type(data).__name__}")
    key, data = split_key(data, key_field)
    return TaskLine(number, key, validate_request(data))


def parse_lines(lines: Iterable[str], key_field: str | None = None) -> Iterator[tuple[int, TaskLine | str]]:
    """(line number, keyed request) for each non-blank line, or (line number, why it was rejected)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, parse_line(number, line, key_field)
        except InvalidTaskRequest as exc:
            yield number, str(exc)

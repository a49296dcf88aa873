"""What goes into the log and what comes out of it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agl_events.events.kinds import spec
from agl_events.topics import Topic


def new_event_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class NewEvent:
    """An event decided by a command, not yet in the log. `record` holds the schema's fields."""

    kind: str
    key: str
    record: dict[str, Any]

    @property
    def topic(self) -> Topic:
        return spec(self.kind).topic


@dataclass(frozen=True)
class EncodedEvent:
    """A NewEvent with the bytes the log stores for it, encoded once, when it was decided."""

    new: NewEvent
    value: bytes


def event(kind: str, key: str, time: float, producer_id: str, **fields: Any) -> NewEvent:
    """Build a NewEvent with the header every schema carries (event id, decision time, producer)."""
    return NewEvent(kind, key, {"event_id": new_event_id(), "time": time, "producer_id": producer_id, **fields})


@dataclass(frozen=True)
class LoggedEvent:
    """An event as it sits in the log: decoded, with its position. The position makes replay idempotent."""

    kind: str
    key: str | None
    record: dict[str, Any]
    topic: str
    partition: int
    offset: int
    headers: dict[str, bytes] = field(default_factory=dict)


Position = tuple[str, int]  # (topic, partition)


def reached(positions: Mapping[Position, int], targets: Mapping[Position, int]) -> bool:
    """Whether `positions` (next offsets to read) are at or past every target offset."""
    return all(positions.get(pos, 0) >= end for pos, end in targets.items())

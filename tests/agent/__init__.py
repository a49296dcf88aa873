"""Tests of agents, emitters and the Kafka tracer; `read_spans` is shared by the modules that hit the broker."""

from __future__ import annotations

from typing import Any

from agl_events.events.codec import AvroCodec
from agl_events.events.convert import span_from_record
from agl_events.log.reader import EventReader
from agl_events.log.records import LoggedEvent
from agl_events.topics import Topic
from tests.eventually import eventually


def read_spans(bootstrap: str, experiment: str, expected: int, settle: float = 0.5,
               deadline: float = 30.0) -> tuple[list[LoggedEvent], list[dict[str, Any]]]:
    """Every event of the span topic (waiting for `expected`, then a moment for extras), and the decoded
    span dicts in sequence-id order."""
    reader = EventReader(bootstrap, experiment, AvroCodec(), [Topic.SPANS])
    reader.assign()
    events: list[LoggedEvent] = []

    def read() -> list[LoggedEvent]:
        events.extend(reader.poll(2000, 0.2))
        return events

    eventually(read, f"{expected} spans in the log", within=deadline, until=lambda got: len(got) >= expected)
    events.extend(reader.poll(2000, settle))  # waits the whole `settle` (unless 2000 come): extras show up
    reader.close()
    spans = sorted((span_from_record(e.record["span"]) for e in events), key=lambda s: s["sequence_id"])
    return events, spans

"""The dead-letter path: a record nobody can process is copied, byte for byte, to the experiment's DLQ topic.

Undecodable records (the store's reader, the view processor), rollouts the samples processor's adapter could
not turn into a sample, and events the live store's view ignored (a status change for a rollout or attempt
never created: `reducers.changes.Pending.ignore`) go there, in one format: origin and error in headers.
"""

from __future__ import annotations

from collections.abc import Callable

from agl_events.events.codec import AvroCodec
from agl_events.log.records import LoggedEvent, RawRecord
from agl_events.log.writer import EventWriter
from agl_events.topics import Topic, topic_name

#: The error type of an event the view ignored (`dead_letter_ignored_to`).
IGNORED_EVENT = "IgnoredEvent"


def _headers(topic: str, partition: int, offset: int, error_type: str, message: str) -> dict[str, bytes]:
    return {"agl.source.topic": topic.encode(), "agl.source.partition": str(partition).encode(),
            "agl.source.offset": str(offset).encode(), "agl.error.type": error_type.encode(),
            "agl.error.message": message.encode()}


#: What a reader calls with a record it cannot use and why: the record is copied to the DLQ.
DeadLetter = Callable[[RawRecord, Exception], None]


def dead_letter_to(writer: EventWriter) -> DeadLetter:
    """A handler (the store's reader and ingester, the processors) that keeps the bad record, byte for byte,
    and says where it came from and why. Fire-and-forget: flush `writer` before reading past the record."""
    dlq = topic_name(writer.experiment, Topic.DLQ)

    def handle(record: RawRecord, error: Exception) -> None:
        writer.produce_raw(dlq, record.value, record.key, _headers(record.topic, record.partition, record.offset,
                                                                   type(error).__name__, str(error)))

    return handle


def dead_letter_ignored_to(writer: EventWriter, codec: AvroCodec) -> Callable[[LoggedEvent, str], None]:
    """A handler (StoreView's `on_ignored`) that keeps an event the view ignored, encoded as the current schema
    writes it (the same bytes for a record of the current version), with where it came from and why."""
    dlq = topic_name(writer.experiment, Topic.DLQ)

    def handle(event: LoggedEvent, reason: str) -> None:
        writer.produce_raw(dlq, codec.encode(event.kind, event.record), None if event.key is None else
                           event.key.encode(), _headers(event.topic, event.partition, event.offset, IGNORED_EVENT,
                                                        reason))

    return handle

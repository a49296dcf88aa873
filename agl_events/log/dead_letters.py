"""The dead-letter path: an undecodable record is copied, byte for byte, to the experiment's DLQ topic."""

from __future__ import annotations

from confluent_kafka import Message

from agl_events.events.codec import CodecError
from agl_events.log.reader import DeadLetter
from agl_events.log.writer import EventWriter
from agl_events.topics import Topic, topic_name


def dead_letter_to(writer: EventWriter) -> DeadLetter:
    """A handler for EventReader that keeps the bad record and says where it came from and why."""
    dlq = topic_name(writer.experiment, Topic.DLQ)

    def handle(msg: Message, error: CodecError) -> None:
        writer.produce_raw(dlq, msg.value(), msg.key(), {
            "agl.source.topic": (msg.topic() or "").encode(),
            "agl.source.partition": str(msg.partition()).encode(),
            "agl.source.offset": str(msg.offset()).encode(),
            "agl.error.type": type(error).__name__.encode(),
            "agl.error.message": str(error).encode(),
        })

    return handle

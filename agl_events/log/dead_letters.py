"""The dead-letter path: a record nobody can process is copied, byte for byte, to the experiment's DLQ topic.

Undecodable records (the store's reader, the view processor) and rollouts the samples processor's
adapter could not turn into a sample go there, in one format: origin and error in headers.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Message

from agl_events.log.writer import EventWriter
from agl_events.topics import Topic, topic_name


def dead_letter_to(writer: EventWriter) -> Callable[[Message, Exception], None]:
    """A handler (EventReader's `DeadLetter`) that keeps the bad record and says where it came from and why."""
    dlq = topic_name(writer.experiment, Topic.DLQ)

    def handle(msg: Message, error: Exception) -> None:
        writer.produce_raw(dlq, msg.value(), msg.key(), {
            "agl.source.topic": (msg.topic() or "").encode(),
            "agl.source.partition": str(msg.partition()).encode(),
            "agl.source.offset": str(msg.offset()).encode(),
            "agl.error.type": type(error).__name__.encode(),
            "agl.error.message": str(error).encode(),
        })

    return handle

"""How far the store has ingested the task-requests topic, read from Kafka alone (no store needed).

The store's ingest consumer group commits a partition's offset only once the requests before it are rollouts
(or dead letters), so produced minus committed is what is still pending; it is the same lag any Kafka tool
(`kafka-consumer-groups --describe --group agl-events-store.<experiment>`) shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from agl_events.log.clients import make_consumer
from agl_events.log.offsets import committed, partitions_of, watermarks
from agl_events.store.ingester import ingest_group
from agl_events.topics import Topic, topic_name


@dataclass(frozen=True)
class PartitionProgress:
    partition: int
    #: The partition's end offset: records ever produced to it (retention may have dropped the oldest).
    produced: int
    #: The ingest group's committed offset: records the store has turned into rollouts or dead letters.
    ingested: int

    @property
    def pending(self) -> int:
        return self.produced - self.ingested


class TopicMissingError(RuntimeError):
    """The experiment has no task-requests topic yet."""


def ingest_progress(bootstrap: str, experiment: str, timeout: float = 10.0) -> list[PartitionProgress]:
    """Per partition of the experiment's task-requests topic: produced, ingested, pending."""
    topic = topic_name(experiment, Topic.TASK_REQUESTS)
    consumer = make_consumer(bootstrap, ingest_group(experiment))  # reads the group's offsets, never joins it
    try:
        try:
            partitions = partitions_of(consumer, [topic], timeout)
        except RuntimeError:
            raise TopicMissingError(f"experiment {experiment} has no topic {topic}: nothing was produced to it; "
                                    "`agl-events topics create` creates it") from None
        ingested = committed(consumer, partitions, timeout)
        progress = []
        for position, (low, high) in watermarks(consumer, partitions, timeout).items():
            done = ingested[position]
            progress.append(PartitionProgress(position[1], high, low if done is None else done))  # None: not yet
        return progress
    finally:
        consumer.close()

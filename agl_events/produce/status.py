"""How far the store has ingested the task-requests topic, read from Kafka alone (no store needed).

The store's ingest consumer group commits a partition's offset only once the requests before it are rollouts
(or dead letters), so produced minus committed is what is still pending; it is the same lag any Kafka tool
(`kafka-consumer-groups --describe --group agl-events-store.<experiment>`) shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import TopicPartition

from agl_events.log.clients import make_consumer
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
        info = consumer.list_topics(topic, timeout=timeout).topics[topic]
        if info.error is not None:
            raise TopicMissingError(f"experiment {experiment} has no topic {topic}: nothing was produced to it; "
                                    "`agl-events topics create` creates it")
        partitions = [TopicPartition(topic, p) for p in sorted(info.partitions)]
        progress = []
        for committed in consumer.committed(partitions, timeout=timeout):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, committed.partition), timeout=timeout)
            ingested = committed.offset if committed.offset >= 0 else low  # nothing committed yet
            progress.append(PartitionProgress(committed.partition, high, ingested))
        return progress
    finally:
        consumer.close()

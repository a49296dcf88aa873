"""The topic layout of an experiment: names, partitions, retention and why. Pure: creating them is `log.admin`.

Every topic of experiment `exp` is named `agl.<exp>.<suffix>`. Per-rollout ordering is what the
reducers rely on, so everything about a rollout is keyed by its rollout id and lands in one partition.
"""

from __future__ import annotations

import zlib
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

FOREVER = "-1"
DAY_MS = 24 * 3600 * 1000
#: The largest record any topic takes (its max.message.bytes) and the producer sends (message.max.bytes).
#: One limit for every topic, rather than the broker's default of about 1 MiB for all but spans, so that
#: how large an event may be does not depend on its kind (see agl_events.log.encoding).
MESSAGE_MAX_BYTES = 8 * 1024 * 1024


#: The most copies of a partition the layout asks for: three survive the loss of one broker with a majority left.
MAX_REPLICATION = 3


class Replication(BaseModel):
    """How many copies of each partition, and on how many an acknowledged (acks=all) write must be."""

    model_config = ConfigDict(frozen=True)

    factor: int = Field(ge=1)
    min_insync: int = Field(ge=1)

    @model_validator(mode="after")
    def _reachable(self) -> Replication:
        if self.min_insync > self.factor:  # every write would be refused (NOT_ENOUGH_REPLICAS)
            raise ValueError(f"min.insync.replicas {self.min_insync} exceeds the replication factor {self.factor}")
        return self

    @property
    def settings(self) -> dict[str, str]:
        return {"min.insync.replicas": str(self.min_insync)}

    def __str__(self) -> str:
        return f"replication {self.factor}, min.insync.replicas {self.min_insync}"


def replication_for(brokers: int) -> Replication:
    """The replication for a cluster of `brokers`: min(3, brokers) copies, and an acknowledged write on all but
    one of them (where there are several), so losing one broker neither loses an acknowledged write nor stops
    writes."""
    factor = max(1, min(MAX_REPLICATION, brokers))
    return Replication(factor=factor, min_insync=max(1, factor - 1))


class Topic(StrEnum):
    """Topic suffixes; each event kind is written to exactly one of them (see its schema's doc)."""

    ROLLOUTS = "rollouts"
    ATTEMPTS = "attempts"
    SPANS = "spans"
    RESOURCES = "resources"
    WORKERS = "workers"
    TASKS = "tasks"
    TASK_REQUESTS = "task-requests"
    CONTROL = "control"
    SAMPLES = "samples"
    STEPS = "steps"
    DLQ = "dlq"


class TopicSpec(BaseModel):
    """How one topic is laid out, and why."""

    topic: Topic
    key: str
    partitions: int
    config: dict[str, str]
    why: str

    def name(self, experiment: str) -> str:
        return topic_name(experiment, self.topic)

    @property
    def settings(self) -> dict[str, str]:
        """The topic configuration it is created with: its own, plus the record limit every topic shares."""
        return {"max.message.bytes": str(MESSAGE_MAX_BYTES), **self.config}


def topic_name(experiment: str, topic: Topic) -> str:
    return f"agl.{experiment}.{topic.value}"


LAYOUT: tuple[TopicSpec, ...] = (
    TopicSpec(topic=Topic.ROLLOUTS, key="rollout_id", partitions=3,
              config={"retention.ms": FOREVER, "cleanup.policy": "delete"},
              why="source of truth for rollouts and the queue; kept forever so views rebuild from offset 0"),
    TopicSpec(topic=Topic.ATTEMPTS, key="rollout_id", partitions=3,
              config={"retention.ms": FOREVER, "cleanup.policy": "delete"},
              why="attempt lifecycle and heartbeats, ordered per rollout; kept forever"),
    TopicSpec(topic=Topic.SPANS, key="rollout_id", partitions=6,
              config={"retention.ms": FOREVER, "cleanup.policy": "delete", "compression.type": "producer"},
              why="the bulk of the data (training traces); more partitions to spread ingest; kept forever "
                  "for replay and export"),
    TopicSpec(topic=Topic.RESOURCES, key="resources_id", partitions=1,
              config={"cleanup.policy": "compact", "retention.ms": FOREVER},
              why="each event is a full snapshot, so compaction keeps exactly the latest version of each id; "
                  "one partition gives one global order for 'latest'"),
    TopicSpec(topic=Topic.WORKERS, key="worker_id", partitions=1,
              config={"cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS)},
              why="soft liveness state; a week is enough to see who ran what recently"),
    TopicSpec(topic=Topic.TASKS, key="rollout_id", partitions=6,
              config={"cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS)},
              why="dispatched attempts for runners (a consumer group); work, not history"),
    TopicSpec(topic=Topic.TASK_REQUESTS, key="the producer's idempotency key (a task id)", partitions=3,
              config={"cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS)},
              why="task requests any Kafka client writes (JSON or Avro TaskRequested); the store turns each key "
                  "into one rollout, so the rollouts topic stays the history and this is only the inbox"),
    TopicSpec(topic=Topic.CONTROL, key="worker_id (or * for all)", partitions=1,
              config={"cleanup.policy": "delete", "retention.ms": str(DAY_MS)},
              why="requests to runners (stop); apart from the workers topic so that every runner reads only "
                  "these, not every worker's liveness events"),
    TopicSpec(topic=Topic.SAMPLES, key="rollout_id", partitions=3,
              config={"retention.ms": FOREVER, "cleanup.policy": "delete"},
              why="training samples the samples processor derives from finished rollouts, for trainers (a consumer "
                  "group each); kept forever to export and retrain from, though rebuildable from the spans"),
    TopicSpec(topic=Topic.STEPS, key="the trainer's transactional id", partitions=1,
              config={"retention.ms": FOREVER, "cleanup.policy": "delete"},
              why="one JSON record per committed training step (the samples it used and dropped, the weights "
                  "version it wrote), written in one transaction with the trainer's sample offsets; kept forever"),
    TopicSpec(topic=Topic.DLQ, key="source topic/partition/offset", partitions=1,
              config={"cleanup.policy": "delete", "retention.ms": str(30 * DAY_MS)},
              why="undecodable records, kept a month for inspection with their origin in headers"),
)

#: The topics the store's view (and the processor's views) fold: those of the folded event kinds
#: (`events.kinds`; a test checks they agree).
VIEW_TOPICS: tuple[Topic, ...] = (Topic.ROLLOUTS, Topic.ATTEMPTS, Topic.SPANS, Topic.RESOURCES, Topic.WORKERS)


def partition_of(key: str | bytes, partitions: int) -> int:
    """The partition our producers put `key` in: librdkafka's default `consistent_random` partitioner.

    That is CRC-32 of the key modulo the partition count (for non-empty keys), NOT the Java client's
    murmur2: `log.clients.producer_config` does not set `partitioner`, so confluent-kafka keeps its
    default. Should the producers ever be switched to `murmur2_random` (Java-compatible), this has to
    follow (murmur2 is `aiokafka.partitioner.murmur2(key) & 0x7fffffff`).
    """
    raw = key.encode() if isinstance(key, str) else key
    return zlib.crc32(raw) % partitions

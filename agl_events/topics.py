"""The topic layout of an experiment, and its idempotent creation through the AdminClient.

Every topic of experiment `exp` is named `agl.<exp>.<suffix>`. Per-rollout ordering is what the
reducers rely on, so everything about a rollout is keyed by its rollout id and lands in one partition.
"""

from __future__ import annotations

import time
from enum import StrEnum

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from pydantic import BaseModel

FOREVER = "-1"
DAY_MS = 24 * 3600 * 1000
#: The largest record any topic takes (its max.message.bytes) and the producer sends (message.max.bytes).
#: One limit for every topic, rather than the broker's default of about 1 MiB for all but spans, so that
#: how large an event may be does not depend on its kind (see agl_events.log.encoding).
MESSAGE_MAX_BYTES = 8 * 1024 * 1024


class Topic(StrEnum):
    """Topic suffixes; each event kind is written to exactly one of them (see its schema's doc)."""

    ROLLOUTS = "rollouts"
    ATTEMPTS = "attempts"
    SPANS = "spans"
    RESOURCES = "resources"
    WORKERS = "workers"
    TASKS = "tasks"
    CONTROL = "control"
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
    TopicSpec(topic=Topic.CONTROL, key="worker_id (or * for all)", partitions=1,
              config={"cleanup.policy": "delete", "retention.ms": str(DAY_MS)},
              why="requests to runners (stop); apart from the workers topic so that every runner reads only "
                  "these, not every worker's liveness events"),
    TopicSpec(topic=Topic.DLQ, key="source topic/partition/offset", partitions=1,
              config={"cleanup.policy": "delete", "retention.ms": str(30 * DAY_MS)},
              why="undecodable records, kept a month for inspection with their origin in headers"),
)


#: Which topic each event kind is appended to. Kinds that concern a rollout are keyed by its id.
EVENT_TOPIC: dict[str, Topic] = {
    "RolloutEnqueued": Topic.ROLLOUTS,
    "RolloutStarted": Topic.ROLLOUTS,
    "RolloutUpdated": Topic.ROLLOUTS,
    "RolloutStatusChanged": Topic.ROLLOUTS,
    "AttemptCreated": Topic.ATTEMPTS,
    "AttemptStatusChanged": Topic.ATTEMPTS,
    "AttemptUpdated": Topic.ATTEMPTS,
    "AttemptHeartbeat": Topic.ATTEMPTS,
    "SpanAdded": Topic.SPANS,
    "SpanSequenceReserved": Topic.SPANS,
    "ResourcesPublished": Topic.RESOURCES,
    "ResourcesUpdated": Topic.RESOURCES,
    "WorkerHeartbeat": Topic.WORKERS,
    "WorkerStatusChanged": Topic.WORKERS,
    "RunnersStopRequested": Topic.CONTROL,
    "TaskDispatched": Topic.TASKS,
}


def create_topics(admin: AdminClient, experiment: str, timeout: float = 30.0) -> dict[str, str]:
    """Create every topic of the experiment that does not exist yet; returns topic -> 'created'|'exists'.

    Topics that exist are left as they are: ones created before every topic took MESSAGE_MAX_BYTES records
    keep the broker's limit (about 1 MiB) for all but spans, so a larger event fails when it is appended.
    """
    existing = set(admin.list_topics(timeout=timeout).topics)
    wanted = [spec for spec in LAYOUT if spec.name(experiment) not in existing]
    result = {spec.name(experiment): "exists" for spec in LAYOUT if spec.name(experiment) in existing}
    if not wanted:
        return result
    futures = admin.create_topics(
        [NewTopic(spec.name(experiment), num_partitions=spec.partitions, replication_factor=-1,
                  config=spec.settings) for spec in wanted],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    for name, future in futures.items():
        try:
            future.result()
            result[name] = "created"
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # a concurrent creator won the race
                raise
            result[name] = "exists"
    wait_for_leaders(admin, [spec.name(experiment) for spec in wanted], timeout)
    return result


def wait_for_leaders(admin: AdminClient, topics: list[str], timeout: float) -> None:
    """Block until every partition of `topics` has a leader: a new topic answers NOT_LEADER for a moment."""
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(timeout=timeout).topics
        pending = [t for t in topics if t not in meta or meta[t].error is not None
                   or any(p.leader < 0 for p in meta[t].partitions.values())]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics without a leader after {timeout}s: {', '.join(pending)}")
        time.sleep(0.1)


def delete_topics(admin: AdminClient, prefix: str, timeout: float = 30.0) -> list[str]:
    """Delete every topic whose name starts with `prefix` (tests clean up their experiments with it)."""
    names = [t for t in admin.list_topics(timeout=timeout).topics if t.startswith(prefix)]
    if names:
        for future in admin.delete_topics(names, operation_timeout=timeout, request_timeout=timeout).values():
            future.result()
    return names

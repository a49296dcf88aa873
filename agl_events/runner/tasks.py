"""The runners' queue: the tasks topic read as a Kafka 4 share group (KIP-932).

A share group hands each record to one member and lets any number of members read one partition, so an
idle runner gets the next task even while a slow rollout holds another runner, whatever the partition
count. The store writes one task per record batch and a runner fetches at most as many records as it has
slots (one for a runner running one rollout at a time), so it acquires only tasks it is about to run.
We accept a task as soon as the store granted the claim: from then on the store's watchdog, not Kafka's
redelivery, retries a rollout whose runner died.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaException, Message
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.log.clients import make_admin, make_share_consumer
from agl_events.topics import Topic, topic_name

log = logging.getLogger(__name__)


def share_group(experiment: str) -> str:
    return f"agl-runners-{experiment}"


#: How long a task fetched by a runner stays reserved to it. The client fetches ahead in the background,
#: so a runner busy with a long rollout holds the tasks it fetched until their lock expires; a short lock
#: hands them to idle runners sooner. Brokers refuse values under group.share.min.record.lock.duration.ms
#: (15 s by default; our local broker allows 1 s), in which case the group keeps the broker's default.
TASK_LOCK_MS = 5000


def configure_share_group(admin: AdminClient, group: str) -> None:
    """Share groups start at the log end by default; tasks enqueued before the first runner must count."""
    entries = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result()
    lock = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry("share.record.lock.duration.ms", str(TASK_LOCK_MS), incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([lock])[lock].result()
    except KafkaException as exc:
        log.warning("keeping the broker's task lock duration: %s", exc)


@dataclass(frozen=True)
class Task:
    """A dispatched rollout, as a runner sees it before claiming it."""

    rollout_id: str
    queue_seq: int | None
    message: Any


class TaskQueue:
    def __init__(self, bootstrap: str, experiment: str, codec: AvroCodec, runner_id: str, max_records: int = 1
                 ) -> None:
        """`max_records`: the most tasks one poll hands out (the runner's slots)."""
        self.codec = codec
        configure_share_group(make_admin(bootstrap), share_group(experiment))
        self._consumer = make_share_consumer(bootstrap, share_group(experiment), **{
            "client.id": runner_id, "share.acknowledgement.mode": "explicit", "max.poll.records": max_records,
            "fetch.wait.max.ms": 500,
            "log_level": 3,  # the client warns that share consumers are a preview on every start
        })
        self._topic = topic_name(experiment, Topic.TASKS)
        self._consumer.subscribe([self._topic])
        self._membership = threading.Lock()
        self._stepped_aside = False

    def step_aside(self) -> None:
        """Leave the group while a long rollout runs: the client fetches ahead in the background and would
        keep re-acquiring tasks that idle runners could run. Leaving hands them back at once."""
        with self._membership:
            if not self._stepped_aside:
                self._consumer.unsubscribe()
                self._stepped_aside = True

    def rejoin(self) -> None:
        with self._membership:
            if self._stepped_aside:
                self._consumer.subscribe([self._topic])
                self._stepped_aside = False

    def next_tasks(self, timeout: float) -> list[Task]:
        """The next tasks (up to `max_records`), or none. Undecodable records are rejected (they would never
        decode)."""
        tasks = []
        for message in self._consumer.poll(timeout):
            if message.error() is not None:
                log.warning("task queue: %s", message.error())
                continue
            try:
                decoded = self.codec.decode(message.value() or b"")
            except CodecError:
                self._settle(message, AcknowledgeType.REJECT)
                continue
            if decoded.name != "TaskDispatched":
                self._settle(message, AcknowledgeType.ACCEPT)
                continue
            tasks.append(Task(decoded.record["rollout_id"], decoded.record.get("queue_seq"), message))
        return tasks

    def done(self, task: Task) -> None:
        """Claimed (or no longer claimable): nobody else needs this record."""
        self._settle(task.message, AcknowledgeType.ACCEPT)

    def give_back(self, task: Task) -> None:
        """Could not even try to claim it (the store is down): let another runner have it."""
        self._settle(task.message, AcknowledgeType.RELEASE)

    def _settle(self, message: Message, kind: AcknowledgeType) -> None:
        """Record the outcome; it reaches the broker with the next poll (a separate commit costs a round trip).

        A task whose lock expired while this runner was busy went to another runner; the claim said so
        already, and the acknowledgement can only fail: nothing to do.
        """
        try:
            self._consumer.acknowledge(message, kind)
        except KafkaException as exc:
            log.info("task acknowledgement refused (lock expired?): %s", exc)

    def close(self) -> None:
        self._consumer.commit_sync()
        self._consumer.close()

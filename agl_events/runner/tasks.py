"""The runners' queue: the tasks topic read as a Kafka 4 share group (KIP-932).

A share group hands each record to one member and lets any number of members read one partition, so an
idle runner gets the next task even while a slow rollout holds another runner, whatever the partition
count. The store writes one task per record batch and a runner fetches at most as many records as it has
slots (one for a runner running one rollout at a time), so it acquires only tasks it is about to run.
We accept a task as soon as the store granted the claim: from then on the store's watchdog, not Kafka's
redelivery, retries a rollout whose runner died.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.log.share import Acquired, Outcome, ShareMember, configure_share_group
from agl_events.topics import Topic, topic_name


def share_group(experiment: str) -> str:
    return f"agl-runners-{experiment}"


#: How long a task fetched by a runner stays reserved to it. The client fetches ahead in the background,
#: so a runner busy with a long rollout holds the tasks it fetched until their lock expires; a short lock
#: hands them to idle runners sooner. Brokers refuse values under group.share.min.record.lock.duration.ms
#: (15 s by default; our local broker allows 1 s), in which case the group keeps the broker's default.
TASK_LOCK_MS = 5000
#: How many times a task record may be handed out (Kafka's default is 5; 10 is the most a broker allows by
#: default). Each time a busy runner steps aside or hands back tasks it fetched beyond its free slots counts; a
#: record past the limit is archived, and only the store's re-dispatch of rollouts left unclaimed
#: (`store.commands.unclaimed`) gets such a rollout run. The higher limit makes that rare.
TASK_DELIVERY_LIMIT = 10


@dataclass(frozen=True)
class Task:
    """A dispatched rollout, as a runner sees it before claiming it."""

    rollout_id: str
    queue_seq: int | None
    record: Acquired


class TaskQueue:
    def __init__(self, bootstrap: str, experiment: str, codec: AvroCodec, runner_id: str, max_records: int = 1
                 ) -> None:
        """`max_records`: the most tasks one poll hands out (the runner's slots)."""
        self.codec = codec
        configure_share_group(bootstrap, share_group(experiment), TASK_LOCK_MS, TASK_DELIVERY_LIMIT)
        self._consumer = ShareMember(bootstrap, share_group(experiment), max_records,
                                     **{"client.id": runner_id, "fetch.wait.max.ms": 500})
        self._topic = topic_name(experiment, Topic.TASKS)
        self._consumer.subscribe(self._topic)
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
                self._consumer.subscribe(self._topic)
                self._stepped_aside = False

    def next_tasks(self, timeout: float) -> list[Task]:
        """The next tasks (up to `max_records`), or none. Undecodable records are rejected (they would never
        decode)."""
        tasks = []
        for acquired in self._consumer.poll(timeout):
            try:
                decoded = self.codec.decode(acquired.record.value or b"")
            except CodecError:
                self._consumer.settle(acquired, Outcome.REJECT)
                continue
            if decoded.name != "TaskDispatched":
                self._consumer.settle(acquired, Outcome.ACCEPT)
                continue
            tasks.append(Task(decoded.record["rollout_id"], decoded.record.get("queue_seq"), acquired))
        return tasks

    def done(self, task: Task) -> None:
        """Claimed (or no longer claimable): nobody else needs this record."""
        self._consumer.settle(task.record, Outcome.ACCEPT)

    def give_back(self, task: Task) -> None:
        """Could not even try to claim it (the store is down): let another runner have it."""
        self._consumer.settle(task.record, Outcome.RELEASE)

    def close(self) -> None:
        self._consumer.close()

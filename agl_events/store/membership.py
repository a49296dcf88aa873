"""The store group: store processes of one experiment share the rollouts topic's partitions as a consumer group.

Kafka's group protocol is the arbiter (`store.ownership` says what owning means): each member's `client.id`
is the URL other stores reach it at, so describing the group tells every member who owns what. The member
reads nothing (its partitions stay paused); it is there for the assignment:
- on revoke (a store joins or leaves; eager protocol, so before anyone gets partitions) the store stops
  deciding for them and waits until every command it took is durable (`release`);
- on assign the store catches its view up with the end of the log before it decides (`acquire`): whatever
  the previous owner wrote, drained or acknowledged before it died, is folded first, so nothing is decided
  twice or on stale state.
A killed store's partitions move once the group's session timeout (`SESSION_TIMEOUT_MS`) passes.
The callbacks run on this module's poll thread and block it while the event loop does the work.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable

from confluent_kafka import Consumer, TopicPartition

from agl_events.log.clients import make_admin, make_consumer
from agl_events.store.ownership import Ownership

log = logging.getLogger(__name__)

#: A dead store's partitions move after this (the broker's group.min.session.timeout.ms is 6 s by default).
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
POLL_SECONDS = 0.2
#: How often members re-read who owns what, besides after every rebalance and whenever a forward failed.
DESCRIBE_SECONDS = 5.0
#: A release waits for in-flight commits; an acquire for the catch-up (a long history can take minutes).
RELEASE_TIMEOUT_SECONDS = 60.0
ACQUIRE_TIMEOUT_SECONDS = 600.0

Handover = Callable[[set[int]], Awaitable[None]]


def group_id(experiment: str) -> str:
    return f"agl-events-store-owners.{experiment}"


class StoreGroup:
    """This store's membership in its experiment's store group, on a thread of its own."""

    def __init__(self, bootstrap: str, experiment: str, topic: str, ownership: Ownership,
                 acquire: Handover, release: Handover) -> None:
        self._consumer: Consumer = make_consumer(
            bootstrap, group_id(experiment), **{"client.id": ownership.own_url, "enable.partition.eof": False,
                                                "session.timeout.ms": SESSION_TIMEOUT_MS,
                                                "heartbeat.interval.ms": HEARTBEAT_MS,
                                                "partition.assignment.strategy": "roundrobin"})
        self._admin = make_admin(bootstrap)
        self._group = group_id(experiment)
        self._topic = topic
        self._ownership = ownership
        self._acquire = acquire
        self._release = release
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._describe_now = threading.Event()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._consumer.subscribe([self._topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                 on_lost=self._on_revoke)
        self._thread = threading.Thread(target=self._run, name="agl-store-group", daemon=True)
        self._thread.start()

    def refresh(self) -> None:
        """Describe the group again soon: a forward found its owner gone or not owning."""
        self._describe_now.set()

    def _run(self) -> None:
        next_describe = 0.0
        while not self._stopping.is_set():
            self._consumer.poll(POLL_SECONDS)
            if time.monotonic() >= next_describe or self._describe_now.is_set():
                self._describe_now.clear()
                self._describe()
                next_describe = time.monotonic() + DESCRIBE_SECONDS
        self._consumer.close()  # leaves the group: revokes (and releases) our partitions first

    def _describe(self) -> None:
        try:
            group = self._admin.describe_consumer_groups([self._group])[self._group].result(10)
        except Exception as exc:  # the next describe tries again; forwards wait meanwhile
            log.warning("describing the store group failed: %s", exc)
            return
        owners = {tp.partition: member.client_id for member in group.members
                  for tp in (member.assignment.topic_partitions if member.assignment else [])
                  if tp.topic == self._topic}
        self._on_loop(self._learn(owners), 10.0)

    async def _learn(self, owners: dict[int, str]) -> None:
        self._ownership.learn(owners)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.assign(partitions)
        consumer.pause(partitions)
        taken = {tp.partition for tp in partitions}
        log.info("store %s takes partitions %s", self._ownership.own_url, sorted(taken))
        self._on_loop(self._acquire(taken), ACQUIRE_TIMEOUT_SECONDS)
        self._describe_now.set()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        given = {tp.partition for tp in partitions}
        log.info("store %s hands over partitions %s", self._ownership.own_url, sorted(given))
        self._on_loop(self._release(given), RELEASE_TIMEOUT_SECONDS)
        self._describe_now.set()

    def _on_loop(self, work: Awaitable[None], timeout: float) -> None:
        assert self._loop is not None
        if self._loop.is_closed():
            return
        future = asyncio.run_coroutine_threadsafe(work, self._loop)  # type: ignore[arg-type]
        try:
            future.result(timeout)
        except Exception:
            log.exception("store group handover failed")

    def stop(self) -> None:
        """Leave the group (blocking: call it off the event loop, which must keep running for the release)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

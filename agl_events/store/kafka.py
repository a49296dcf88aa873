"""The Kafka backend: events appended with an idempotent acks=all producer, the view in RocksDB.

One store process owns an experiment: it decides every command (see `committer`), so dequeue,
sequence ids and attempt numbers need no distributed locking. Its RocksDB view is derived: on start
it catches up from the offsets stored in the view itself (or from offset 0 into an empty folder),
then keeps following the topics (`follower`), so events appended by other producers are folded in too.
This module only builds the clients and the storage (a `Backend`); behaviour is the store's parts'.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import cast

from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.backpressure import BackpressureStats
from agl_events.log.clients import make_admin
from agl_events.log.dead_letters import dead_letter_ignored_to, dead_letter_to
from agl_events.log.reader import EventReader
from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent, Position
from agl_events.log.registry import codec_for
from agl_events.log.writer import EventWriter, abandon
from agl_events.store.backend import Backend, Companion
from agl_events.store.contract import LightningStore
from agl_events.store.follower import Follower
from agl_events.store.group import Group
from agl_events.store.ingester import Ingester
from agl_events.store.lane import ask
from agl_events.store.membership import StoreGroup
from agl_events.store.ownership import Ownership
from agl_events.store.partition_folds import PartitionFolds
from agl_events.store.peers import PeerStores
from agl_events.store.routing import Router
from agl_events.store.service import EventSourcedStore
from agl_events.topics import VIEW_TOPICS, Topic, topic_name
from agl_events.views.rocks import RocksKV
from agl_events.views.status_counts import StatusCountingKV
from agl_events.views.store_view import StoreView

log = logging.getLogger(__name__)

#: The consumer's prefetch cap: with the follower's bounded polls, a store rebuilding 1M spans stays near 300 MB.
PREFETCH_KB = 8192
#: How long closing waits for unacknowledged appends: a shutdown with the broker gone must still end.
CLOSE_FLUSH_SECONDS = 5.0
#: The reader's fetch long-poll. A fetch returns as soon as any record arrives, so this adds no latency;
#: it bounds how often an idle store asks the broker (a 20 ms poll cost an idle store and broker CPU).
FETCH_WAIT_MS = 500


class KafkaLog:
    """EventLog over two durable writers: one for everything, one for the tasks topic.

    Tasks go out one per record batch, so that a runner's share consumer, fetching at most one record,
    acquires exactly one task (share fetches hand out whole batches) and idle runners get the others.
    """

    def __init__(self, writer: EventWriter, tasks_writer: EventWriter) -> None:
        self.writer = writer
        self.tasks_writer = tasks_writer

    def encode(self, new: NewEvent) -> bytes:
        return self.writer.encode(new)  # both writers have the one codec

    def append(self, events: Sequence[EncodedEvent]) -> Awaitable[list[LoggedEvent]]:
        tasks = [e for e in events if e.new.topic == Topic.TASKS]
        if not tasks:
            return self.writer.append(events)
        rest = self.writer.append([e for e in events if e.new.topic != Topic.TASKS])
        try:
            dispatched = self.tasks_writer.append(tasks)
        except BaseException:  # the batch fails with this error; the rest is queued and may still land
            abandon([rest])
            raise
        return _joined(rest, dispatched)

    def backpressure(self) -> dict[str, BackpressureStats]:
        """Waits for room in each writer's bounded producer queue."""
        return {"producer": self.writer.backpressure.stats, "tasks_producer": self.tasks_writer.backpressure.stats}

    def close(self) -> None:
        self.writer.close(CLOSE_FLUSH_SECONDS)
        self.tasks_writer.close(CLOSE_FLUSH_SECONDS)


async def _joined(*appends: Awaitable[list[LoggedEvent]]) -> list[LoggedEvent]:
    return [logged for part in await asyncio.gather(*appends) for logged in part]


class KafkaLightningStore(EventSourcedStore):
    """The LightningStore of one experiment, durable in Kafka. Build it with `await KafkaLightningStore.open()`."""

    @classmethod
    async def open(cls, settings: Settings, *, view_dir: Path | None = None, scan_debounce_seconds: float = 10.0,
                   clock: Callable[[], float] = time.time, advertise_url: str | None = None,
                   auth_token: str | None = None) -> KafkaLightningStore:
        """Connect to `settings.bootstrap_servers`, create the topics, catch up, follow.

        Starting a local broker is the caller's decision (the CLI and the Trainer do), not the library's.
        With `advertise_url` (where other stores reach this one's REST API) the store joins the experiment's
        store group and decides only for the rollouts of the partitions it owns, forwarding the rest with
        `auth_token` (`store.ownership`); without it, it decides everything itself.
        """
        bootstrap = settings.bootstrap_servers
        await ask(functools.partial(create_topics, make_admin(bootstrap), settings.experiment))
        codec = codec_for(settings.schema_registry_url)
        producer_id = f"store-{socket.gethostname()}-{os.getpid()}"
        writer = EventWriter(bootstrap, settings.experiment, codec, producer_id=producer_id)
        tasks_writer = EventWriter(bootstrap, settings.experiment, codec, producer_id=producer_id,
                                   **{"batch.num.messages": 1, "linger.ms": 0})
        view_dir = view_dir or settings.home / "views" / settings.experiment
        counted = StatusCountingKV(RocksKV(view_dir))
        view = StoreView(counted, on_ignored=dead_letter_ignored_to(writer, codec))
        reader = EventReader(bootstrap, settings.experiment, codec, VIEW_TOPICS,
                             dead_letter=dead_letter_to(writer), fold_only=True, known=view.own_event,
                             **{"fetch.wait.max.ms": FETCH_WAIT_MS, "queued.max.messages.kbytes": PREFETCH_KB})
        rollouts_topic = topic_name(settings.experiment, Topic.ROLLOUTS)
        ownership = None if advertise_url is None else Ownership(
            await ask(functools.partial(_partition_count, bootstrap, rollouts_topic)), advertise_url)
        router = Router(ownership, PeerStores(settings.experiment, auth_token) if ownership else None)
        follower = Follower(reader, view)
        partition_folds = None if ownership is None else _partition_folds(
            ownership.partitions, await ask(reader.partitions), settings.experiment, follower, reader)
        companions: dict[str, Callable[[LightningStore, Group], Companion]] = {}
        if ownership is not None:
            companions["membership"] = lambda store, group: _Membership(StoreGroup(
                bootstrap, settings.experiment, rollouts_topic, ownership, group.take_over, group.hand_over),
                router)
        companions["ingester"] = lambda store, group: Ingester(  # started last: once the view holds every key enqueued
            bootstrap, settings.experiment, topic_name(settings.experiment, Topic.TASK_REQUESTS), codec,
            store.ingest_task, dead_letter_to(writer), writer.flush,
            catch_up=group.catch_up_rollouts if ownership is not None else None,
            known=functools.partial(_known_in_group, router, store) if ownership is not None else None)
        kafka_log = KafkaLog(writer, tasks_writer)
        store = cls(Backend(view, producer_id, kafka_log, follower, router=router, partition_folds=partition_folds,
                            companions=companions, log_queues=kafka_log.backpressure,
                            dead_letters=lambda: writer.raw_produced, log_ends=reader.cached_end_offsets,
                            status_counts=counted.counts, view_dir=view_dir),
                    reader, scan_debounce_seconds=scan_debounce_seconds, clock=clock)
        try:
            reader.assign(view.positions, None if partition_folds is None else partition_folds.is_global)
            applied = await store.start()
        except BaseException:
            await store.close()  # release the RocksDB lock so that a retry can open the view
            raise
        log.info("experiment %s: view caught up (%d events folded)", settings.experiment, applied)
        return store

    def __init__(self, backend: Backend, reader: EventReader, *, scan_debounce_seconds: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(backend, scan_debounce_seconds=scan_debounce_seconds, clock=clock)
        self._reader = reader
        #: The consumer turning the task-requests topic into rollouts.
        self.ingester = cast(Ingester, self._parts.companions["ingester"])

    @property
    def dead_lettered(self) -> int:
        """Undecodable records this store's reader sent to the dead-letter topic."""
        return self._reader.dead_lettered


class _Membership:
    """The store group's membership as a companion of the store: it leaves the group on close."""

    def __init__(self, group: StoreGroup, router: Router) -> None:
        self._group = group
        self._router = router

    def start(self) -> None:
        self._router.refresh = self._group.refresh
        self._group.start()

    async def stop(self) -> None:
        await self._group.leave()  # hands our partitions over (drained) while the committer still runs


async def _known_in_group(router: Router, store: LightningStore, keys: list[str]) -> dict[str, str]:
    """Which keys of an ingester's poll the group turned into rollouts, once this store owns a partition to
    create the others in (it waits for one as `ingest_task` does; NoOwnerError once the store closes)."""
    await router.owning()
    return await store.task_rollouts(keys)


def _partition_folds(rollout_partitions: int, positions: list[Position], experiment: str, follower: Follower,
                     reader: EventReader) -> PartitionFolds:
    """A store group's member folds the per-rollout topics' partitions of the rollouts it owns."""
    names = {topic_name(experiment, t) for t in (Topic.ROLLOUTS, Topic.ATTEMPTS, Topic.SPANS)}
    per_rollout = Counter(name for name, _ in positions if name in names)

    async def follow(added: set[Position]) -> None:
        await follower.reassign(functools.partial(reader.add, added, follower.view.positions))

    async def unfollow(removed: set[Position]) -> None:
        await follower.reassign(functools.partial(reader.remove, removed))

    return PartitionFolds(rollout_partitions, per_rollout, follow, unfollow)


def _partition_count(bootstrap: str, topic: str) -> int:
    """How many partitions `topic` has: the store group's unit of ownership."""
    return len(make_admin(bootstrap).list_topics(topic, timeout=30).topics[topic].partitions)

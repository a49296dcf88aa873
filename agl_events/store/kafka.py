"""The Kafka backend: events appended with an idempotent acks=all producer, the view in RocksDB.

One store process owns an experiment: it decides every command (see `committer`), so dequeue,
sequence ids and attempt numbers need no distributed locking. Its RocksDB view is derived: on start
it catches up from the offsets stored in the view itself (or from offset 0 into an empty folder),
then keeps following the topics, so events appended by other producers are folded in too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.clients import make_admin
from agl_events.log.dead_letters import dead_letter_to
from agl_events.log.reader import EventReader, reached
from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent
from agl_events.log.writer import EventWriter, abandon
from agl_events.store.base import UNSET
from agl_events.store.service import EventSourcedStore
from agl_events.topics import Topic, create_topics, topic_name
from agl_events.types import Attempt
from agl_events.views.kv import RocksKV
from agl_events.views.store_view import StoreView

log = logging.getLogger(__name__)

VIEW_TOPICS = (Topic.ROLLOUTS, Topic.ATTEMPTS, Topic.SPANS, Topic.RESOURCES, Topic.WORKERS)
#: Records decoded and folded per step. Bounded memory while rebuilding a long history, and no fold rate lost:
#: with the consumer's prefetch capped too (PREFETCH_KB), a store rebuilding 1M spans stays near 300 MB.
POLL_RECORDS = 1000
PREFETCH_KB = 8192


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

    def close(self) -> None:
        self.writer.close()
        self.tasks_writer.close()


async def _joined(*appends: Awaitable[list[LoggedEvent]]) -> list[LoggedEvent]:
    return [logged for part in await asyncio.gather(*appends) for logged in part]


class KafkaLightningStore(EventSourcedStore):
    """The LightningStore of one experiment, durable in Kafka. Build it with `await KafkaLightningStore.open()`."""

    def __init__(self, log_: KafkaLog, reader: EventReader, view: StoreView,
                 scan_debounce_seconds: float = 10.0) -> None:
        super().__init__(log_, view, producer_id=log_.writer.producer_id, scan_debounce_seconds=scan_debounce_seconds)
        self._log = log_
        self._writer = log_.writer
        self._reader = reader
        self._follower: asyncio.Task[None] | None = None
        self._progress = asyncio.Event()
        #: How far the view has folded each partition (the reader's positions as of its last folded batch).
        self._folded: dict[tuple[str, int], int] = {}
        #: (rollout, attempt) pairs with foreign spans whose heartbeat is still to be decided, in arrival order.
        self._beats: dict[tuple[str, str], None] = {}
        self._beating: asyncio.Task[None] | None = None
        self._closed = False
        self._watchdog: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, settings: Settings | None = None, *, view_dir: Path | None = None,
                   scan_debounce_seconds: float = 10.0) -> KafkaLightningStore:
        """Connect (starting the local broker if no cluster is configured), create topics, catch up, follow."""
        settings = settings or Settings.from_env()
        bootstrap = await asyncio.to_thread(ensure_broker, settings)
        await asyncio.to_thread(create_topics, make_admin(bootstrap), settings.experiment)
        codec = AvroCodec.from_url(settings.schema_registry_url)
        producer_id = f"store-{socket.gethostname()}-{os.getpid()}"
        writer = EventWriter(bootstrap, settings.experiment, codec, producer_id=producer_id)
        tasks_writer = EventWriter(bootstrap, settings.experiment, codec, producer_id=producer_id,
                                   **{"batch.num.messages": 1, "linger.ms": 0})
        view = StoreView(RocksKV(view_dir or settings.home / "views" / settings.experiment))
        reader = EventReader(bootstrap, settings.experiment, codec, VIEW_TOPICS,
                             dead_letter=dead_letter_to(writer),
                             **{"fetch.wait.max.ms": 20, "queued.max.messages.kbytes": PREFETCH_KB})
        store = cls(KafkaLog(writer, tasks_writer), reader, view, scan_debounce_seconds)
        try:
            reader.assign(view.positions)
            applied = await store.catch_up()
        except BaseException:
            await store.close()  # release the RocksDB lock so that a retry can open the view
            raise
        log.info("experiment %s: view caught up (%d events folded)", settings.experiment, applied)
        store._follower = asyncio.get_running_loop().create_task(store._follow(), name="agl-follow")
        store._watchdog = asyncio.get_running_loop().create_task(store._watch(), name="agl-watchdog")
        return store

    async def catch_up(self) -> int:
        """Fold everything in the log up to its current end; the store answers nothing before this."""
        targets = await asyncio.to_thread(self._reader.end_offsets)
        applied = 0
        while not self._reader.caught_up_to(targets):
            batch = await asyncio.to_thread(self._reader.poll, POLL_RECORDS, 0.5)
            applied += self.view.apply_logged(batch)
        self._folded = self._reader.positions
        return applied

    async def _follow(self) -> None:
        """Fold what others append (and confirm our own appends) as it arrives."""
        while True:
            # A short poll: `consume` waits out its whole timeout when fewer records come, and callers of
            # `caught_up` (every finishing attempt) wait for the next round.
            batch = await asyncio.to_thread(self._reader.poll, POLL_RECORDS, 0.01)
            read = self._reader.positions  # only this task polls: exactly how far this batch goes
            if batch:
                self.view.apply_logged(batch)
                self.notify_applied(batch)
            self._folded = read
            self._progress.set()
            self._progress.clear()
            self._beats.update(dict.fromkeys((e.record["span"]["rollout_id"], e.record["span"]["attempt_id"])
                                             for e in batch if e.kind == "SpanAdded"
                                             and e.record["producer_id"] != self._writer.producer_id))
            if self._beats and (self._beating is None or self._beating.done()):
                self._beating = asyncio.get_running_loop().create_task(self._beat(), name="agl-heartbeats")

    async def _beat(self) -> None:
        """Decide the heartbeats of foreign spans off the follower's path: it keeps folding meanwhile
        (a finishing attempt waits for the fold), and spans arriving meanwhile join the next decision."""
        while self._beats:
            pairs, self._beats = list(self._beats), {}
            try:
                await self.record_heartbeats(pairs)
            except Exception:  # the next span of that attempt is another heartbeat; keep following
                log.exception("recording heartbeats failed")

    async def caught_up(self, topic: Topic) -> None:
        """Wait until the view holds everything in `topic` that was acknowledged before this call."""
        targets = await asyncio.to_thread(self._reader.end_offsets, 30.0, topic_name(self._writer.experiment, topic))
        await self._folded_through(targets)

    async def _folded_through(self, targets: dict[tuple[str, int], int]) -> None:
        # Not the reader's own positions: they move on while its batch is still on the way to the view.
        while not reached(self._folded, targets):
            await self._progress.wait()

    async def update_attempt(self, rollout_id: str, attempt_id: str, status: Any = UNSET, worker_id: Any = UNSET,
                             last_heartbeat_time: Any = UNSET, metadata: Any = UNSET) -> Attempt:
        """A runner flushes its spans to Kafka before it reports the attempt finished; fold them first, so
        whoever waits for the rollout reads all its spans. Not knowing where they went, ask the broker
        where every span partition ends (one request per partition); `finish_attempt` avoids that."""
        if status in ("succeeded", "failed"):
            await self.caught_up(Topic.SPANS)
        return await super().update_attempt(rollout_id, attempt_id, status=status, worker_id=worker_id,
                                             last_heartbeat_time=last_heartbeat_time, metadata=metadata)

    async def finish_attempt(self, rollout_id: str, attempt_id: str, status: Literal["succeeded", "failed"],
                             spans_through: Mapping[int, int]) -> Attempt:
        """Wait until the view has read the runner's spans (`spans_through` comes from its delivery reports:
        no broker request, unlike `update_attempt`), then record the attempt finished."""
        spans = topic_name(self._writer.experiment, Topic.SPANS)
        await self._folded_through({(spans, partition): end for partition, end in spans_through.items()})
        return await super().update_attempt(rollout_id, attempt_id, status=status)

    async def _watch(self) -> None:
        """Timeouts fire even when nobody calls the store (upstream only checks before calls)."""
        while True:
            await asyncio.sleep(max(self._debounce, 1.0))
            try:
                await self.healthcheck()
            except Exception:  # a failed scan is retried next period; the store keeps serving
                log.exception("watchdog scan failed")

    @property
    def dead_lettered(self) -> int:
        return self._reader.dead_lettered

    async def close(self) -> None:
        """Idempotent: the server closes the stores it served, and their owner may close them too."""
        if self._closed:
            return
        self._closed = True
        for task in (self._follower, self._watchdog, self._beating):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await super().close()
        await asyncio.to_thread(self._log.close)
        self._reader.close()
        self.view.close()

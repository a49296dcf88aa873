"""The store's consumer of the task-requests topic: records any Kafka client wrote become enqueued rollouts.

Exactly once per idempotency key, by two rules:
- The decision is the store's own (`commands.ingest.ingest_task`, through the group committer like every
  command, so a poll's requests are decided and appended as one batch): a key already in the view's key index
  enqueues nothing. The index is folded from the RolloutEnqueued events themselves, so it is exactly as
  durable as the rollouts, and the store catches its view up before this consumer starts.
- The consumer group's offsets are committed only after every request of a poll is durable (its rollout
  acknowledged by acks=all, or its record dead-lettered and flushed). A restart mid-batch re-reads from the
  last commit; the requests already enqueued are found in the index and skipped. So a crash can re-read
  records, never lose them, and a re-read never makes a second rollout.
The offsets live in the consumer group, not the view, because they only decide what is re-read, and re-reading
is harmless: any Kafka tool (kafka-consumer-groups) then shows the ingest lag.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

from agl_events.events.codec import AvroCodec
from agl_events.events.task_record import decode_task_request
from agl_events.events.task_request import InvalidTaskRequest, TaskRequest
from agl_events.log.consumer import GroupConsumer, Start
from agl_events.log.dead_letters import DeadLetter
from agl_events.log.records import Position, RawRecord
from agl_events.store.errors import NoOwnerError
from agl_events.store.lane import Lane, ask

log = logging.getLogger(__name__)

#: Records decided per poll: one committer batch, one offset commit.
POLL_RECORDS = 1000
POLL_SECONDS = 0.25
#: After an append failed, wait this long before re-reading the batch from its start.
RETRY_SECONDS = 1.0

Ingest = Callable[[str, TaskRequest], Awaitable[tuple[str, bool]]]
Known = Callable[[list[str]], Awaitable[dict[str, str]]]


def ingest_group(experiment: str) -> str:
    return f"agl-events-store.{experiment}"


class Ingester:
    """Polls `topic`, hands each request to `ingest`, dead-letters the invalid ones, then commits."""

    def __init__(self, bootstrap: str, experiment: str, topic: str, codec: AvroCodec, ingest: Ingest,
                 dead_letter: DeadLetter, flush_dead_letters: Callable[[], None],
                 catch_up: Callable[[], Awaitable[None]] | None = None, known: Known | None = None) -> None:
        """`catch_up` (a store group: several stores ingest, each the partitions the consumer group gives it)
        folds the rollouts topic to its end; it runs before the first requests of every new assignment, so
        the keys the previous reader of those partitions enqueued are in the view before any is decided.
        `known` (a store group, whose members each fold only the rollouts they own) says which keys of a poll
        became rollouts anywhere in the group: asked once per poll, before its requests are decided here."""
        self._consumer = GroupConsumer(bootstrap, ingest_group(experiment), "task-requests",
                                       **{"enable.partition.eof": False, "session.timeout.ms": 6000})
        #: Every call on the consumer runs on a thread of its own (`store.lane`), in order.
        self._lane = Lane("agl-ingest-poll")
        self._catch_up = catch_up
        self._known = known
        self._reassigned = False
        self._topic = topic
        self._codec = codec
        self._ingest = ingest
        self._dead_letter = dead_letter
        self._flush_dead_letters = flush_dead_letters
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.enqueued = 0
        self.duplicates = 0
        self.dead_lettered = 0

    def start(self) -> None:
        """Read every partition from the group's committed offsets (from the start where none is committed).

        Assigned, not subscribed: the store is the only reader of its experiment's requests, and a restarted
        store after a SIGKILL must not wait out the dead member's session before a rebalance gives it work."""
        if self._catch_up is not None:
            self._consumer.partitions(self._topic)  # a missing topic fails the start, not the first poll
            self._consumer.subscribe(self._topic, on_assign=self._on_assign)
        else:
            self._consumer.assign(self._topic, Start.STORED)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="agl-ingest")

    async def _run(self) -> None:
        while not self._stopping.is_set():
            messages = await self._lane.run(functools.partial(self._consumer.consume, POLL_RECORDS, POLL_SECONDS))
            if not messages:
                continue
            try:
                if self._reassigned and self._catch_up is not None:
                    self._reassigned = False
                    await self._catch_up()
                await self._handle(messages)
            except NoOwnerError as exc:
                # The store is closing (`Router.stop`; `stop` follows), or the group named no owner for some
                # partition in time (a take-over still folding, a dead member's session not over): either way the
                # batch is read again, by this ingester or the next reader.
                log.warning("ingesting %d task requests waits for the store group (%s)", len(messages), exc)
            except Exception:  # the log refused an append: nothing is committed
                log.exception("ingesting %d task requests failed; re-reading them", len(messages))
            else:
                await self._lane.run(functools.partial(self._commit, messages))
                continue
            await self._lane.run(functools.partial(self._rewind, messages))
            with contextlib.suppress(TimeoutError):  # a pause before reading them again, cut short by `stop`
                await asyncio.wait_for(self._stopping.wait(), RETRY_SECONDS)

    def _on_assign(self, partitions: list[Position]) -> None:
        """Called inside a poll, so after the batch before it was decided and committed."""
        self._reassigned = True

    async def _handle(self, messages: list[RawRecord]) -> None:
        """Decide every request of the poll (one committer batch), dead-letter the invalid, flush the DLQ."""
        known = {} if self._known is None else await self._known([_key_of(msg) for msg in messages])
        outcomes = await asyncio.gather(*(self._one(msg, known) for msg in messages))
        self.enqueued += sum(1 for outcome in outcomes if outcome is True)
        self.duplicates += sum(1 for outcome in outcomes if outcome is False)
        if any(outcome is None for outcome in outcomes):
            await ask(self._flush_dead_letters)

    async def _one(self, msg: RawRecord, known: dict[str, str]) -> bool | None:
        """True: enqueued now; False: its key was enqueued before (here, or `known` in the group); None:
        dead-lettered."""
        try:
            request = decode_task_request(self._codec, msg.value)
            if _key_of(msg) in known:
                return False
            _, created = await self._ingest(_key_of(msg), request)
            return created
        except InvalidTaskRequest as exc:
            log.warning("task request at %s[%d]@%d dead-lettered: %s", msg.topic, msg.partition, msg.offset, exc)
            self.dead_lettered += 1
            self._dead_letter(msg, exc)
            return None

    def _commit(self, messages: list[RawRecord]) -> None:
        self._consumer.commit({msg.position: msg.offset + 1 for msg in messages})  # the last one per partition

    def _rewind(self, messages: list[RawRecord]) -> None:
        first: dict[Position, int] = {}
        for msg in messages:
            first.setdefault(msg.position, msg.offset)
        for position, offset in first.items():
            self._consumer.seek(position, offset)

    async def stop(self) -> None:
        """Let the poll in progress end (at most POLL_SECONDS) and the batch in hand settle, then leave the group."""
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        await self._lane.run(self._consumer.close)
        self._lane.close()


def _key_of(msg: RawRecord) -> str:
    """The producer's idempotency key; a record without one is identified by where it sits in the log."""
    return msg.key.decode(errors="replace") if msg.key else f"{msg.topic}/{msg.partition}/{msg.offset}"

"""What the processors' agents and pages work with, handed to them explicitly instead of through globals.

One `ProcessorContext` per view-processor app: the codec, the per-partition views, and the dead-letter
writer. Keeping them in one small object makes the agents thin (decode, reduce, write) and lets the
folding step (`fold_records`) run without faust at all, in tests or scripts. The consumed record (the log's
`RawRecord`), its decoding per partition and its dead-letter copy are shared with the samples processor.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.log.clients import LogError, make_admin
from agl_events.log.dead_letters import dead_letter_to
from agl_events.log.records import LoggedEvent, RawRecord, ReadBatch, decode_record
from agl_events.log.registry import codec_for
from agl_events.log.writer import EventWriter
from agl_events.processors.partition_views import PartitionViews, Position
from agl_events.topics import VIEW_TOPICS, topic_name

log = logging.getLogger(__name__)


def raw_record(message: Any) -> RawRecord:
    """A faust `Message` (what `event.message` is in a stream; value_serializer="raw") as the log's record."""
    return RawRecord(message.topic, message.partition, message.offset, message.key, message.value,
                     dict(message.headers or ()), int(message.timestamp * 1000) if message.timestamp else 0)


def raw_records(events: Iterable[Any]) -> list[RawRecord]:
    """The records of a batch of faust stream events (`stream.take_events`)."""
    return [raw_record(event.message) for event in events]


class DeadLetters:
    """Copies consumed records, byte for byte, to `agl.<exp>.dlq`, their origin and the error in headers.

    The copies are fire-and-forget until `flush`, which callers await before storing a position past
    the records: once a position is beyond a record, nobody reads it again, so its copy must be durable.
    """

    def __init__(self, writer: EventWriter) -> None:
        self._writer = writer
        self._handle = dead_letter_to(writer)
        self._unflushed = 0

    def __call__(self, record: RawRecord, error: Exception) -> None:
        self._handle(record, error)
        self._unflushed += 1

    async def flush(self) -> None:
        """Wait (in a thread: it may wait on the broker) until every copy so far is delivered."""
        if self._unflushed:
            await asyncio.to_thread(self._writer.flush)
            self._unflushed = 0


@dataclass
class FoldCounters:
    """What this worker has done since it started (for /views/stats; not persisted)."""

    batches: int = 0
    folded: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    not_ours: int = 0


@dataclass
class ProcessorContext:
    """The clients of one processor app."""

    experiment: str
    codec: AvroCodec
    views: PartitionViews
    writer: EventWriter
    topics: tuple[str, ...]
    bootstrap: str = ""
    counters: FoldCounters = field(default_factory=FoldCounters)
    _dead_letters: DeadLetters | None = None
    _partition_counts: dict[str, int] = field(default_factory=dict)

    async def partition_count(self, topic: str) -> int | None:
        """How many partitions `topic` has, asked of the broker once (None if it cannot tell).

        Not from faust's consumer: only the group leader's aiokafka keeps a metadata snapshot.
        """
        if topic not in self._partition_counts:
            def ask() -> int | None:
                meta = make_admin(self.bootstrap).list_topics(topic, timeout=5.0).topics.get(topic)
                return len(meta.partitions) if meta is not None and meta.error is None else None

            try:
                count = await asyncio.to_thread(ask)
            except LogError as exc:
                log.warning("cannot read the partition count of %s: %s", topic, exc)
                return None
            if count is None:
                return None
            self._partition_counts[topic] = count
        return self._partition_counts[topic]

    def dead_letter(self, record: RawRecord, error: CodecError) -> None:
        """Copy an undecodable record, byte for byte, to `agl.<exp>.dlq` with its origin in headers."""
        self.counters.dead_lettered += 1
        log.error("undecodable record at %s[%d]@%d: %s", record.topic, record.partition, record.offset, error)
        self.dead_letters(record, error)

    @property
    def dead_letters(self) -> DeadLetters:
        if self._dead_letters is None:
            self._dead_letters = DeadLetters(self.writer)
        return self._dead_letters

    async def close(self) -> None:
        """Close every view (on the event loop, so no fold or query is half-way through one), then flush
        the dead letters still in flight (in a thread: it may wait on the broker)."""
        self.views.close()
        await asyncio.to_thread(self.writer.close)


def build_context(bootstrap: str, experiment: str, data_dir: Path,
                  schema_registry_url: str | None = None) -> ProcessorContext:
    """Clients for one worker; the producer is only used for dead letters (acks=all, idempotent)."""
    codec = codec_for(schema_registry_url)
    writer = EventWriter(bootstrap, experiment, codec,
                         producer_id=f"processor-{socket.gethostname()}-{os.getpid()}")
    return ProcessorContext(experiment=experiment, codec=codec, views=PartitionViews(data_dir), writer=writer,
                            topics=tuple(topic_name(experiment, t) for t in VIEW_TOPICS), bootstrap=bootstrap)


@dataclass
class DecodedBatch:
    """A consumed batch, decoded and split by the partitions this worker holds."""

    events: dict[Position, list[LoggedEvent]] = field(default_factory=dict)
    #: Per partition: the offset just past its last record in the batch, decoded or dead-lettered.
    through: dict[Position, int] = field(default_factory=dict)
    bad: int = 0
    not_ours: int = 0
    #: Records before their partition's next offset: read before (a restart, a rebalance), not decoded again.
    redelivered: int = 0


def decode_batch(codec: AvroCodec, next_offset: Callable[[str, int], int | None], records: Iterable[RawRecord],
                 dead_letter: Callable[[RawRecord, CodecError], None], *, fold_only: bool = False) -> DecodedBatch:
    """Decode the records of held partitions not read yet; hand undecodable ones to `dead_letter`; skip the others.
    `fold_only`: spans are read as far as their keys (`decode_record`), for a worker that only folds them.

    `next_offset` says where this worker's state of a partition stands (None: not its partition). Records of
    partitions this worker no longer holds (a rebalance raced the batch) are left to their new owner; records
    before the next offset were read already, so an undecodable one among them is not copied to the DLQ again.
    """
    batch = DecodedBatch()
    for record in records:
        start = next_offset(record.topic, record.partition)
        if start is None:
            batch.not_ours += 1
            continue
        if record.offset < start:
            batch.redelivered += 1
            continue
        position = (record.topic, record.partition)
        batch.through[position] = max(batch.through.get(position, 0), record.offset + 1)
        try:
            decoded = decode_record(codec, record, fold_only=fold_only)
        except CodecError as exc:
            dead_letter(record, exc)
            batch.bad += 1
            continue
        batch.events.setdefault(position, []).append(decoded)
    return batch


async def fold_records(ctx: ProcessorContext, records: Iterable[RawRecord]) -> int:
    """Decode, reduce and write one batch; returns how many events were new to the views.

    Each partition's events go to that partition's view in one `StoreView.fold`, i.e. one RocksDB batch that
    also stores the partition's next offset (past its dead-lettered records too), so a crash keeps state and
    position together. Dead letters are flushed before any view moves past them.
    """
    batch = decode_batch(ctx.codec, ctx.views.next_offset, records, ctx.dead_letter, fold_only=True)
    ctx.counters.not_ours += batch.not_ours
    if batch.bad:
        await ctx.dead_letters.flush()
    fresh = 0
    total = 0
    for (topic, partition), through in batch.through.items():
        events = batch.events.get((topic, partition), [])
        view = ctx.views.view(topic, partition)
        if view is None:  # revoked while the dead letters were flushed
            ctx.counters.not_ours += len(events)
            continue
        fresh += view.fold(ReadBatch(events, {(topic, partition): through}))
        total += len(events)
    ctx.counters.batches += 1
    ctx.counters.folded += fresh
    ctx.counters.redelivered += batch.redelivered + total - fresh
    return fresh

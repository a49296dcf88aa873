"""One batch of the samples processor, without faust: decode, fold, emit the samples, then store positions.

Effectively once per finished rollout attempt, across restarts and rebalances:
- Each partition's batch is folded (`SampleBuffer.fold`) into changes and finished rollouts, but nothing
  is written yet.
- The samples go out on the idempotent acks=all writer (keyed by rollout id), dead letters on the DLQ;
  both are awaited.
- Only then is each partition's fold committed: buffered spans, "sampled" marks and the next offset in
  one RocksDB batch. A crash before the commit re-reads from the old position and emits the same
  samples again (same sample ids, same content: consumers dedupe by sample id); after it, the marker is
  never read again. A partition revoked while the samples were in flight is not committed: its next
  owner re-emits from the stored position, the same way.
- An emit that fails (Kafka gave up on it) raises: the worker must stop, not skip the batch, and its
  restart resumes at the stored positions.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.records import EncodedEvent, RawRecord, event
from agl_events.log.registry import codec_for
from agl_events.log.writer import EventWriter
from agl_events.processors.context import DeadLetters, decode_batch
from agl_events.processors.partition_views import PartitionStates
from agl_events.samples.buffer import Build, Finished, Folded, SampleBuffer
from agl_events.samples.build import Adapter, adapter_name, build_sample
from agl_events.samples.model import sample_fields
from agl_events.topics import Topic, topic_name
from agl_events.views.rocks import RocksKV

log = logging.getLogger(__name__)


@dataclass
class SampleCounters:
    """What this worker has done since it started (for /samples/stats; not persisted)."""

    batches: int = 0
    #: Span-topic events folded into the buffers.
    folded: int = 0
    sampled: int = 0
    dead_lettered: int = 0
    undecodable: int = 0
    late_spans: int = 0
    repeated: int = 0
    redelivered: int = 0
    not_ours: int = 0
    #: Folds not committed because their partition was revoked while their samples were in flight.
    abandoned: int = 0


@dataclass
class SamplesContext:
    """The clients and state of one samples app."""

    experiment: str
    codec: AvroCodec
    states: PartitionStates[SampleBuffer]
    writer: EventWriter
    adapter: str
    build: Build
    topic: str
    counters: SampleCounters = field(default_factory=SampleCounters)
    dead_letters: DeadLetters = field(init=False)

    def __post_init__(self) -> None:
        self.dead_letters = DeadLetters(self.writer)

    def dead_letter(self, record: RawRecord, error: Exception) -> None:
        self.counters.dead_lettered += 1
        self.dead_letters(record, error)

    def undecodable(self, record: RawRecord, error: Exception) -> None:
        self.counters.undecodable += 1
        log.error("undecodable record at %s[%d]@%d: %s", record.topic, record.partition, record.offset, error)
        self.dead_letters(record, error)

    async def close(self) -> None:
        """Close every partition's state, then flush what is still in flight (in a thread)."""
        self.states.close()
        await asyncio.to_thread(self.writer.close)


def build_samples_context(settings: Settings, data_dir: Path, adapter: Adapter) -> SamplesContext:
    """Clients for one worker: its producer writes the samples and the dead letters (acks=all, idempotent)."""
    codec = codec_for(settings.schema_registry_url)
    writer = EventWriter(settings.bootstrap_servers, settings.experiment, codec,
                         producer_id=f"samples-{socket.gethostname()}-{os.getpid()}")
    name = adapter_name(adapter)
    return SamplesContext(
        experiment=settings.experiment, codec=codec,
        states=PartitionStates(data_dir, lambda path: SampleBuffer(RocksKV(path))),
        writer=writer, adapter=name,
        build=functools.partial(build_sample, adapter=adapter, adapter_name=name),
        topic=topic_name(settings.experiment, Topic.SPANS),
    )


async def sample_records(ctx: SamplesContext, records: Iterable[RawRecord]) -> int:
    """Fold, emit and commit one batch (see the module docstring); returns how many samples it emitted."""
    records = list(records)
    batch = decode_batch(ctx.codec, ctx.states.next_offset, records, ctx.undecodable)
    raw = {(r.topic, r.partition, r.offset): r for r in records}
    folds: list[tuple[SampleBuffer, Folded]] = []
    for (topic, partition), through in batch.through.items():
        buffer = ctx.states.view(topic, partition)
        if buffer is not None:
            folds.append((buffer, buffer.fold(topic, partition, batch.events.get((topic, partition), []),
                                              through, ctx.build)))
    samples: list[EncodedEvent] = []
    for _, folded in folds:
        for finished in folded.finished:
            encoded = _encode(ctx, finished, raw)
            if encoded is not None:
                samples.append(encoded)
    if samples:
        await ctx.writer.append(samples)
    await ctx.dead_letters.flush()
    for buffer, folded in folds:
        if ctx.states.view(*folded.position) is not buffer:  # revoked while the samples were in flight
            ctx.counters.abandoned += 1
            continue
        buffer.commit(folded)
        ctx.counters.late_spans += folded.late_spans
        ctx.counters.repeated += folded.repeated
        ctx.counters.redelivered += folded.redelivered
    ctx.counters.not_ours += batch.not_ours
    ctx.counters.redelivered += batch.redelivered
    ctx.counters.batches += 1
    ctx.counters.folded += sum(len(events) for events in batch.events.values())
    ctx.counters.sampled += len(samples)
    return len(samples)


def _encode(ctx: SamplesContext, finished: Finished, raw: dict[tuple[str, int, int], RawRecord]
            ) -> EncodedEvent | None:
    """The SampleAdded record of a finished rollout; None (and a dead letter) when there is no sample."""
    error = finished.error
    if finished.sample is not None:
        try:
            new = event("SampleAdded", finished.sample.rollout_id, time.time(), ctx.writer.producer_id,
                        **sample_fields(finished.sample))
            return EncodedEvent(new, ctx.writer.encode(new))
        except Exception as exc:  # a triplet off the schema, a sample over the record limit
            error = exc
    assert error is not None
    marker = finished.event
    log.error("rollout %s (sample %s) to the DLQ: %s: %s", marker.key, finished.sample_id,
              type(error).__name__, error, exc_info=error)
    ctx.dead_letter(raw[(marker.topic, marker.partition, marker.offset)], error)
    return None

"""SampleStream: a trainer's view of the samples topic, as a consumer group, in training batches.

Why a consumer group with committed offsets (and not a view with its own offsets, as the store has):
a trainer's progress *is* what it has trained on. It commits after each batch it used, so a restarted
trainer resumes at the first sample it had not finished with; samples held back for an incomplete group
stay uncommitted and are read again (see `samples.batching`). Samples are keyed by rollout, so one
group's samples spread over partitions: grouped batches want one consumer per consumer group.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.events.kinds import Kind
from agl_events.log.consumer import GroupConsumer
from agl_events.log.records import Position, RawRecord, decode_record
from agl_events.samples.batching import Batcher, BatchPolicy, BatchStats, Consumed, SampleBatch
from agl_events.samples.model import sample_from_record
from agl_events.topics import Topic, topic_name

log = logging.getLogger(__name__)

#: Where the trainer stands now: the latest resources generation (None: no versions, nothing is stale).
CurrentGeneration = Callable[[], Awaitable[int | None]]


async def _no_generation() -> int | None:
    return None


def default_group(experiment: str) -> str:
    return f"agl-events-trainer-{experiment}"


class SampleStream:
    """Batches of samples from `agl.<experiment>.samples`; `commit()` after training on each batch."""

    def __init__(self, bootstrap: str, experiment: str, codec: AvroCodec, policy: BatchPolicy | None = None, *,
                 group: str | None = None, current_generation: CurrentGeneration = _no_generation,
                 poll_timeout: float = 0.2, on_batch: Callable[[SampleBatch], None] | None = None,
                 recorded: bool = False, **consumer_overrides: Any) -> None:
        """`on_batch` hears of each batch handed out (the trainer's metrics count steps with it).

        `recorded`: the trainer records its steps (`samples.step_log`) and commits through them instead of
        `commit()`. The stream is then the one static member of its group (`group.instance.id`), so a
        restarted trainer takes its place at once rather than after the dead one's session times out, and
        it keeps the samples it skips as stale for the next record (`drain_stale`)."""
        self._on_batch = on_batch
        self.policy = policy or BatchPolicy()
        self.group = group or default_group(experiment)
        self.topic = topic_name(experiment, Topic.SAMPLES)
        self._codec = codec
        self._current_generation = current_generation
        self._poll_timeout = poll_timeout
        self._batcher = Batcher(self.policy, keep_stale=recorded)
        if recorded:
            consumer_overrides = {"group.instance.id": self.group, **consumer_overrides}
        self.consumer = GroupConsumer(bootstrap, self.group, "samples", **consumer_overrides)
        self.consumer.subscribe(self.topic, on_revoke=self._on_revoke)
        self.undecodable = 0

    @property
    def stats(self) -> BatchStats:
        return self._batcher.stats

    @property
    def held(self) -> int:
        """Samples read but not yet in a batch (incomplete groups, or fewer than a batch)."""
        return self._batcher.held

    async def next_batch(self, timeout: float | None = None, partial: bool = False) -> SampleBatch | None:
        """The next full batch; after `timeout` seconds, None (or what is ready, if `partial`)."""
        batch = await self._take(timeout, partial)
        if batch is not None and self._on_batch is not None:
            self._on_batch(batch)
        return batch

    async def _take(self, timeout: float | None, partial: bool) -> SampleBatch | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = await self._current_generation()
            batch = self._batcher.take(current)
            if batch is not None:
                return batch
            if deadline is not None and time.monotonic() >= deadline:
                return self._batcher.take(current, partial=True) if partial else None
            for message in await asyncio.to_thread(self.consumer.consume, 500, self._poll_timeout):
                self._offer(message, current)

    async def batches(self, timeout: float | None = None) -> AsyncIterator[SampleBatch]:
        """Full batches until `timeout` seconds pass without one; commits each once the caller moves on."""
        while (batch := await self.next_batch(timeout)) is not None:
            yield batch
            await self.commit()

    async def commit(self) -> None:
        """Record, synchronously, how far this trainer is done: every batch handed out so far counts as used."""
        offsets = self.committable()
        if offsets:
            await asyncio.to_thread(self.consumer.commit, offsets)

    def committable(self) -> dict[Position, int]:
        """Per partition, where a restarted trainer must read from (`Batcher.committable`)."""
        return self._batcher.committable()

    def drain_stale(self) -> list[Consumed]:
        """The samples skipped as stale since the last call (a `recorded` stream's)."""
        return self._batcher.drain_stale()

    def known(self, sample_ids: Iterable[str]) -> None:
        """Ids committed steps already took: skipped when read again (`Batcher.known`)."""
        self._batcher.known(sample_ids)

    def close(self) -> None:
        self.consumer.close()

    async def __aenter__(self) -> SampleStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    # -- internals ------------------------------------------------------------------------------
    def _offer(self, record: RawRecord, current: int | None) -> None:
        try:
            event = decode_record(self._codec, record)
        except CodecError as exc:  # the samples processor wrote it; nothing a trainer can repair
            self.undecodable += 1
            log.error("undecodable sample at %s[%d]@%d: %s", record.topic, record.partition, record.offset, exc)
            return
        if event.kind != Kind.SAMPLE_ADDED:
            return
        self._batcher.offer(sample_from_record(event.record), (event.topic, event.partition), event.offset,
                            current)

    def _on_revoke(self, partitions: list[Position]) -> None:
        self._batcher.revoke(partitions)

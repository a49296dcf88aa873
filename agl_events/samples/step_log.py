"""The steps topic: a trainer's committed steps, appended transactionally with its sample offsets, read back.

`StepLog.commit` is a training step's commit point: the step's record (`samples.steps.StepRecord`) and the
sample stream's consumer offsets in one Kafka transaction (`log.transactions`). Its transactional id is the
stream's consumer group: one trainer per group, and a restarted one fences the one before it. `read_steps`
reads the committed records (read_committed: an aborted or open transaction's record is never seen).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from agl_events.log.clients import make_consumer
from agl_events.log.offsets import read_to_end
from agl_events.log.transactions import OutRecord, TransactionalWriter
from agl_events.samples.batching import Consumed, SampleBatch
from agl_events.samples.steps import StepRecord, mean_reward, refs
from agl_events.samples.stream import SampleStream
from agl_events.topics import Topic, topic_name


def read_steps(bootstrap: str, experiment: str) -> list[StepRecord]:
    """Every committed step record of `experiment`, in the order committed."""
    consumer = make_consumer(bootstrap, None)
    try:
        return [StepRecord.decode(r.value) for r in read_to_end(consumer, [topic_name(experiment, Topic.STEPS)])
                if r.value is not None]
    finally:
        consumer.close()


class StepLog:
    """Commits a trainer's steps; opening it fences any earlier trainer of the same stream."""

    def __init__(self, bootstrap: str, experiment: str, stream: SampleStream) -> None:
        self.topic = topic_name(experiment, Topic.STEPS)
        self._stream = stream
        self._writer = TransactionalWriter(bootstrap, stream.group)

    @classmethod
    async def open(cls, bootstrap: str, experiment: str, stream: SampleStream) -> StepLog:
        return await asyncio.to_thread(cls, bootstrap, experiment, stream)

    def record(self, step: int, version: int, weights_uri: str, batch: SampleBatch, dropped: list[Consumed]
               ) -> StepRecord:
        """The record of `step`, which trained on `batch` and wrote `version`: with the offsets the stream
        would commit now."""
        return StepRecord(step=step, version=version, weights_uri=weights_uri, time=time.time(),
                          trainer=self._writer.transactional_id, trained=refs(batch.consumed), dropped=refs(dropped),
                          offsets={p: o for (_, p), o in self._stream.committable().items()},
                          mean_reward=mean_reward(batch.samples))

    async def commit(self, record: StepRecord, before_commit: Callable[[], None] | None = None) -> None:
        """`record` and the stream's offsets it names, in one transaction (`TransactionFailed` if aborted)."""
        out = OutRecord(self.topic, self._writer.transactional_id.encode(), record.encode())
        offsets = {(self._stream.topic, p): o for p, o in record.offsets.items()}
        await asyncio.to_thread(self._writer.commit, [out], offsets, self._stream.consumer, before_commit)

    def close(self) -> None:
        self._writer.close()

"""ReplayedSampleStream: an experiment's recorded training samples read back from the samples topic, in the
batches a live trainer took, so a run can be trained again offline (`GRPO.retrain`) or with other filters.
`StepBatches`: exactly the batches its committed steps trained on, named by their step records.

What a batch is: the complete groups of one resources generation, and batches come in ascending generation
order. That is what the synchronous live loop trains on (each step enqueues its groups under the version it
just published and takes them once complete; `max_staleness=0` skips everything older), so replaying the
batches replays the steps. Within a batch the groups come in the order they completed as read, which across
partitions is not fixed: a trainer that needs the same result for the same samples orders them itself (GRPO
does).

Why a fixed stretch of the log, by manual assignment: a replay reads a history, from the beginning up to the
end offsets taken when it opens (or a cut it is given), so records appended meanwhile do not change it; and
it joins no consumer group and commits nothing, so it never moves a live trainer's offsets (`commit()` is a
no-op, there for the live stream's interface).

When a generation is complete: samples are keyed by rollout, so one generation spreads over every partition,
and each partition holds its samples roughly in generation order (a version's rollouts finish before the next
version is published). A generation is handed out once every partition has shown a later one or reached its
end. A sample that turns up after its generation was handed out (a straggler, a late re-emit) is dropped and
counted in `late`; a group still incomplete when its generation is handed out is dropped and its samples
counted in `incomplete`, as the live stream would never have trained on it.

Memory: what is held is the samples of generations not yet complete (deduplicated, filtered), plus one poll's
records (`replay.scan.BATCH_RECORDS`). The partitions are read side by side (one fetch serves every partition
a broker leads), so for a synchronous run that is about one or two generations' samples however long the
history; a partition read far ahead of another (say a slow broker) holds every generation in between until
the other catches up. Samples are small next to the spans they came from: token ids and logprobs.
"""

from __future__ import annotations

import asyncio
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Mapping

from pydantic import BaseModel, Field

from agl_events.events.codec import AvroCodec
from agl_events.events.kinds import Kind
from agl_events.log.reader import EventReader
from agl_events.log.records import Position
from agl_events.replay.scan import HISTORY_CONSUMER, scan
from agl_events.samples.batching import Batcher, BatchPolicy, BatchStats, SampleBatch
from agl_events.samples.model import Sample, sample_from_record
from agl_events.samples.step_log import read_steps
from agl_events.samples.steps import StepRecord
from agl_events.topics import Topic

#: A generation is one batch, however many groups it holds.
_WHOLE_GENERATION = sys.maxsize


class ReplayFilter(BaseModel):
    """Which recorded samples to train on. A sample filtered out leaves its group incomplete, so the whole
    group goes: GRPO normalises rewards within a group, and a partial one would change every advantage."""

    modes: frozenset[str] | None = Field(default=frozenset({"train"}), description="rollout modes; None: all")
    statuses: frozenset[str] | None = Field(default=None, description="final statuses; None: all")
    resources_ids: frozenset[str] | None = Field(default=None, description="resources versions; None: all")
    min_reward: float | None = Field(default=None, description="lowest final reward kept (None counts as 0)")

    def keeps(self, sample: Sample) -> bool:
        return ((self.modes is None or (sample.mode or "") in self.modes)
                and (self.statuses is None or sample.status in self.statuses)
                and (self.resources_ids is None or sample.resources_id in self.resources_ids)
                and (self.min_reward is None or (sample.final_reward or 0.0) >= self.min_reward))


def _generation(sample: Sample) -> int:
    """The order batches come in; samples without a resources version count as generation 0, before any."""
    return sample.resources_generation or 0


class GenerationCutter:
    """Samples in, one batch per complete generation out (pure: the stream feeds it what it reads).

    `partitions` are those the replay reads; a generation is complete once each of them has shown a later
    generation or is among the `finished` ones `ready` is given."""

    def __init__(self, partitions: Collection[Position], selection: ReplayFilter | None = None,
                 group_size: int | None = None) -> None:
        self.selection = selection or ReplayFilter()
        self.stats = BatchStats()
        self.late = 0
        self.incomplete = 0
        self._policy = BatchPolicy(batch_size=_WHOLE_GENERATION, group_size=group_size, modes=None)
        self._partitions = tuple(partitions)
        self._shown: dict[Position, int] = {}  # the latest generation each partition has shown
        self._pending: dict[int, Batcher] = {}  # generations not yet complete, each grouping its own samples
        self._handed_out = -1  # the latest generation handed out

    def offer(self, sample: Sample, position: Position, offset: int) -> None:
        gen = _generation(sample)
        self._shown[position] = max(self._shown.get(position, 0), gen)
        if gen <= self._handed_out:
            self.late += 1
            return
        if not self.selection.keeps(sample):
            self.stats.skipped_filtered += 1
            return
        batcher = self._pending.get(gen)
        if batcher is None:
            batcher = self._pending[gen] = Batcher(self._policy, stats=self.stats)
        batcher.offer(sample, position, offset, None)

    def ready(self, finished: Collection[Position]) -> Iterator[SampleBatch]:
        """The batches of every generation now complete, oldest first (a generation with no complete group
        gives none)."""
        while self._pending:
            gen = min(self._pending)
            if not all(p in finished or self._shown.get(p, -1) > gen for p in self._partitions):
                return
            batcher = self._pending.pop(gen)
            self._handed_out = gen
            batch = batcher.take(None, partial=True)
            self.incomplete += batcher.held
            if batch is not None:
                yield batch

    @property
    def held(self) -> int:
        """Samples of generations not yet complete."""
        return sum(batcher.held for batcher in self._pending.values())


class ReplayedSampleStream:
    """The recorded samples of `experiment` as training batches, one per resources generation, oldest first.

    The live `SampleStream`'s interface (`async with`, `next_batch`, `batches()`, `commit()`, `close()`), and a
    plain iterator (`iter_batches()`, or iterate the stream). There is one pass: every call goes on from
    where the last stopped. `ends` (partition -> end offset, e.g. a replay cut's) bounds the read instead of
    the log's end at open; partitions of other topics in it are ignored, and it never reads past the log's
    end. `group_size`: samples per group, else each sample's own.
    """

    def __init__(self, bootstrap: str, experiment: str, codec: AvroCodec, selection: ReplayFilter | None = None,
                 *, group_size: int | None = None, ends: Mapping[Position, int] | None = None) -> None:
        self._reader = EventReader(bootstrap, experiment, codec, (Topic.SAMPLES,), **HISTORY_CONSUMER)
        self._reader.assign()
        now = self._reader.end_offsets()
        self.ends = now if ends is None else {p: min(ends[p], end) for p, end in now.items() if p in ends}
        self._cutter = GenerationCutter(self.ends, selection, group_size)
        self._batches = self._replay()

    @property
    def stats(self) -> BatchStats:
        """Accepted, batched, duplicates (by sample id) and filtered samples so far."""
        return self._cutter.stats

    @property
    def late(self) -> int:
        """Samples dropped because their generation had already been handed out."""
        return self._cutter.late

    @property
    def incomplete(self) -> int:
        """Samples dropped because their group was incomplete when its generation was handed out."""
        return self._cutter.incomplete

    @property
    def held(self) -> int:
        return self._cutter.held

    @property
    def undecodable(self) -> int:
        return self._reader.dead_lettered

    def iter_batches(self) -> Iterator[SampleBatch]:
        return self._batches

    def __iter__(self) -> Iterator[SampleBatch]:
        return self._batches

    async def next_batch(self, timeout: float | None = None, partial: bool = False) -> SampleBatch | None:
        """The next generation's batch, None once the history is read. `timeout` and `partial` are the live
        stream's: a replay never waits for records to come, and each batch is already its generation whole."""
        return await asyncio.to_thread(next, self._batches, None)

    async def batches(self, timeout: float | None = None) -> AsyncIterator[SampleBatch]:
        while (batch := await self.next_batch(timeout)) is not None:
            yield batch

    async def commit(self) -> None:
        """Nothing to record: a replay has no consumer group."""

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> ReplayedSampleStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ReplayedSampleStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    def _replay(self) -> Iterator[SampleBatch]:
        for batch in scan(self._reader, self.ends):
            for e in batch.events:
                if e.kind == Kind.SAMPLE_ADDED:
                    self._cutter.offer(sample_from_record(e.record), (e.topic, e.partition), e.offset)
            positions = self._reader.positions
            yield from self._cutter.ready({p for p, end in self.ends.items() if positions.get(p, 0) >= end})


class StepBatches:
    """The batch each committed step of `experiment` trained on (its step record's samples, read back from the
    samples topic), in step order: what `GRPO.retrain` takes to replay a run exactly, pipelined or not, and
    across trainer restarts (a restarted trainer loads the weights and optimiser state it committed, so the
    steps chain as in one process).

    Unlike `ReplayedSampleStream` nothing is inferred: no generation cut, no filter. One pass over the
    samples topic up to its end at open; a step's samples are held until its last one is read (samples
    arrive roughly in step order, so that is a step or two's). `RuntimeError` if a record names a sample
    the topic no longer holds."""

    def __init__(self, bootstrap: str, experiment: str, codec: AvroCodec) -> None:
        self.records: list[StepRecord] = read_steps(bootstrap, experiment)
        self._reader = EventReader(bootstrap, experiment, codec, (Topic.SAMPLES,), **HISTORY_CONSUMER)
        self._reader.assign()
        self._ends = self._reader.end_offsets()

    def __iter__(self) -> Iterator[SampleBatch]:
        step_of = {ref.sample_id: index for index, record in enumerate(self.records) for ref in record.trained}
        found: dict[int, dict[str, Sample]] = defaultdict(dict)
        done = 0
        for batch in scan(self._reader, self._ends):
            for e in batch.events:
                if e.kind == Kind.SAMPLE_ADDED and (index := step_of.get(e.record["sample_id"], -1)) >= done:
                    sample = sample_from_record(e.record)
                    found[index].setdefault(sample.sample_id, sample)  # a re-emit is the same sample
            while done < len(self.records) and len(found[done]) == len(self.records[done].trained):
                yield _grouped(found.pop(done).values())
                done += 1
        if done < len(self.records):
            raise RuntimeError(f"step {self.records[done].step} trained on samples the samples topic no longer holds")

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> StepBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _grouped(samples: Iterable[Sample]) -> SampleBatch:
    groups: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        groups[sample.group_id].append(sample)
    return SampleBatch(list(groups.values()))

"""Step records: what one committed training step consumed, and the accounting that proves exactly-once.

A trainer appends one record per step to `agl.<exp>.steps`, in the same Kafka transaction as the sample
stream's consumer offsets (`samples.step_log`): the record says which samples the step trained on, which it
dropped as stale, and where the stream's group now resumes. The transaction makes the step's consumption
atomic; this module is the plain data of it and the checks read back from the log. Pure (no Kafka): JSON
in, JSON out, so any Kafka tool can read the topic.

Accounting, per sample id of the samples topic (a re-emitted copy of a sample is the same sample): a sample
is *trained* by one step, *dropped* as stale by one step, or *unconsumed*: the trainer has not finished with
it yet. Below a record's committed offsets every sample was finished with (trained, dropped, filtered out
by mode or status, or a re-emit of one already seen); at or above them a sample may already have been
trained (a partition whose earlier sample is still held waits for it) and is then never trained again,
since a restarted trainer seeds its batcher with every id the records name (`accounted_ids`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from agl_events.samples.batching import Consumed
from agl_events.samples.model import Sample


class SampleRef(BaseModel):
    """Where a consumed sample was read: its id, partition and offset on the samples topic."""

    sample_id: str
    partition: int
    offset: int


class StepRecord(BaseModel):
    """One committed training step. `version` is the weights version it wrote (`weights_uri`); `offsets`
    (samples partition -> next offset) are the consumer offsets committed with it."""

    step: int = Field(ge=0, description="0-based step number; step k turns weights v(k+1) into v(k+2)")
    version: int = Field(ge=1)
    weights_uri: str
    time: float
    trainer: str = Field(description="the transactional id that committed it")
    trained: list[SampleRef]
    dropped: list[SampleRef] = Field(description="samples given up as too stale since the previous step")
    offsets: dict[int, int]
    mean_reward: float | None = None

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, raw: bytes) -> StepRecord:
        return cls.model_validate_json(raw)


def refs(consumed: Iterable[Consumed]) -> list[SampleRef]:
    """Step record entries for samples as the batcher read them."""
    return [SampleRef(sample_id=c.sample.sample_id, partition=c.position[1], offset=c.offset) for c in consumed]


def mean_reward(samples: Sequence[Sample]) -> float | None:
    """The batch's mean final reward (None counts as 0, as GRPO reads it); None for no samples."""
    return sum(s.final_reward or 0.0 for s in samples) / len(samples) if samples else None


def accounted_ids(records: Iterable[StepRecord]) -> set[str]:
    """Every sample id committed steps trained on or dropped: a restarted trainer never takes these again."""
    return {ref.sample_id for record in records for ref in (*record.trained, *record.dropped)}


def last_step(records: Iterable[StepRecord]) -> StepRecord | None:
    """The step to resume after: the highest committed one (records are appended in step order, one each)."""
    return max(records, key=lambda r: r.step, default=None)


@dataclass(frozen=True)
class Accounting:
    """What became of the samples on the topic, by sample id, judged from the committed step records.

    `twice`: ids two steps took (trained or dropped): a violation. `missed`: ids below the committed offsets
    that no step took and that were not filtered out: skipped, a violation. `unconsumed`: ids at or above the
    committed offsets no step took yet (held for an incomplete group, or not read). `unknown`: ids the
    records name that are not on the topic: a violation."""

    trained: frozenset[str]
    dropped: frozenset[str]
    unconsumed: frozenset[str]
    twice: frozenset[str]
    missed: frozenset[str]
    unknown: frozenset[str]

    @property
    def exactly_once(self) -> bool:
        return not (self.twice or self.missed or self.unknown)


def account(records: Sequence[StepRecord], topic: Iterable[SampleRef], wanted: Mapping[str, bool]) -> Accounting:
    """Check `records` against every sample `topic` holds (`wanted[id]`: whether the trainer's batch policy
    keeps it, by mode and status; those it does not are finished with once read, by no step)."""
    taken = Counter(ref.sample_id for record in records for ref in (*record.trained, *record.dropped))
    trained = {ref.sample_id for record in records for ref in record.trained}
    dropped = {ref.sample_id for record in records for ref in record.dropped}
    last = last_step(records)
    committed = {} if last is None else last.offsets
    on_topic: set[str] = set()
    below: set[str] = set()
    for ref in topic:
        on_topic.add(ref.sample_id)
        if ref.offset < committed.get(ref.partition, 0):
            below.add(ref.sample_id)
    return Accounting(
        trained=frozenset(trained), dropped=frozenset(dropped),
        unconsumed=frozenset(on_topic - below - set(taken)),
        twice=frozenset(sid for sid, n in taken.items() if n > 1),
        missed=frozenset(sid for sid in below if sid not in taken and wanted.get(sid, True)),
        unknown=frozenset(set(taken) - on_topic))

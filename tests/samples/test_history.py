"""ReplayedSampleStream on the real broker, and its generation cutter on plain data: recorded samples come back
one batch per resources generation, oldest first, in complete groups, deduplicated and filtered."""

from __future__ import annotations

import pytest

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.records import Position, event
from agl_events.log.writer import EventWriter
from agl_events.samples.batching import SampleBatch
from agl_events.samples.history import GenerationCutter, ReplayedSampleStream, ReplayFilter
from agl_events.samples.model import Sample, sample_fields
from agl_events.types import Triplet

P0, P1 = ("agl.x.samples", 0), ("agl.x.samples", 1)


def _sample(rid: str, group: str, generation: int, reward: float = 1.0, mode: str = "train",
            status: str = "succeeded") -> Sample:
    triplet = Triplet(prompt={"token_ids": [1, 2]}, response={"token_ids": [3], "logprobs": [-0.5]}, reward=reward)
    return Sample(sample_id=f"{rid}:a", rollout_id=rid, attempt_id="a", group_id=group, group_size=2,
                  resources_id=f"rs-{generation}", resources_generation=generation, mode=mode, status=status,
                  final_reward=reward, input={"task": group}, adapter="test", triplets=[triplet])


def _groups(batch: SampleBatch) -> list[list[str]]:
    """A batch's groups as rollout ids, in a fixed order (the order groups complete in depends on the reads)."""
    return sorted(sorted(s.rollout_id for s in group) for group in batch.groups)


def test_a_generation_is_handed_out_once_every_partition_has_moved_past_it_or_ended() -> None:
    cutter = GenerationCutter([P0, P1])
    cutter.offer(_sample("a1", "a", 1), P0, 0)
    cutter.offer(_sample("a2", "a", 1), P1, 0)
    cutter.offer(_sample("b1", "b", 2), P0, 1)
    assert list(cutter.ready(finished=set())) == [] and cutter.held == 3  # P1 may still hold generation 1
    cutter.offer(_sample("b2", "b", 2), P1, 1)
    [first] = cutter.ready(finished=set())
    assert _groups(first) == [["a1", "a2"]] and cutter.held == 2
    assert list(cutter.ready(finished={P0})) == []  # P1 neither ended nor moved past generation 2
    [second] = cutter.ready(finished={P0, P1})
    assert _groups(second) == [["b1", "b2"]] and cutter.held == 0
    cutter.offer(_sample("a3", "a", 1), P0, 2)  # a straggler of a generation already handed out
    assert cutter.late == 1 and list(cutter.ready(finished={P0, P1})) == []


def _write(settings: Settings, samples: list[Sample]) -> set[int]:
    """Append the samples (keyed by rollout, as the samples worker does); the partitions they landed in."""
    writer = EventWriter(settings.bootstrap_servers, settings.experiment, AvroCodec(), producer_id="test")
    logged = writer.append_sync([event("SampleAdded", s.rollout_id, 0.0, "test", **sample_fields(s)) for s in samples])
    writer.close()
    return {e.partition for e in logged}


GENERATION_1 = [_sample("r1", "g1a", 1, reward=1.0), _sample("r2", "g1a", 1, reward=0.0),
                _sample("r3", "g1b", 1), _sample("r4", "g1b", 1),
                _sample("v1", "g1v", 1, mode="val"), _sample("v2", "g1v", 1, mode="val"),
                _sample("r1", "g1a", 1, reward=1.0)]  # r1 re-emitted
LATER = [_sample("r5", "g2a", 2, reward=0.5), _sample("r6", "g2a", 2),
         _sample("r7", "g2b", 2),  # its group never completes
         _sample("r8", "g3a", 3), _sample("r9", "g3a", 3, status="failed")]


def _replay(settings: Settings, selection: ReplayFilter | None = None, *, group_size: int | None = None,
            ends: dict[Position, int] | None = None) -> list[list[list[str]]]:
    with ReplayedSampleStream(settings.bootstrap_servers, settings.experiment, AvroCodec(), selection,
                              group_size=group_size, ends=ends) as stream:
        return [_groups(batch) for batch in stream]


@pytest.mark.kafka
def test_recorded_samples_come_back_one_batch_per_generation_complete_deduplicated_and_filtered(
        settings: Settings) -> None:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    assert len(_write(settings, GENERATION_1 + LATER)) >= 2  # a generation spread over partitions
    with ReplayedSampleStream(settings.bootstrap_servers, settings.experiment, AvroCodec()) as stream:
        got = [_groups(batch) for batch in stream.iter_batches()]
        assert got == [[["r1", "r2"], ["r3", "r4"]], [["r5", "r6"]], [["r8", "r9"]]]
        assert (stream.stats.duplicates, stream.stats.skipped_filtered, stream.incomplete, stream.late) == (1, 2, 1, 0)
        assert stream.held == 0 and list(stream.iter_batches()) == []  # one pass
    everything = [[["r1", "r2"], ["r3", "r4"], ["v1", "v2"]], [["r5", "r6"]], [["r8", "r9"]]]
    assert _replay(settings, ReplayFilter(modes=None)) == everything
    assert _replay(settings, ReplayFilter(min_reward=0.5)) == [[["r3", "r4"]], [["r5", "r6"]], [["r8", "r9"]]]
    assert _replay(settings, ReplayFilter(resources_ids=frozenset({"rs-2"}))) == [[["r5", "r6"]]]
    assert _replay(settings, ReplayFilter(statuses=frozenset({"succeeded"}))) == [
        [["r1", "r2"], ["r3", "r4"]], [["r5", "r6"]]]  # generation 3 lost its only group to the failed sample
    assert _replay(settings, group_size=1)[1] == [["r5"], ["r6"], ["r7"]]  # the policy's group size wins


@pytest.mark.kafka
async def test_a_replay_reads_up_to_where_the_log_ended_when_it_opened_with_the_live_interface(
        settings: Settings) -> None:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    _write(settings, GENERATION_1)
    async with ReplayedSampleStream(settings.bootstrap_servers, settings.experiment, AvroCodec()) as stream:
        ends = stream.ends
        _write(settings, LATER)  # appended after it opened: not part of this history
        got = [_groups(batch) async for batch in stream.batches()]
        await stream.commit()
        assert got == [[["r1", "r2"], ["r3", "r4"]]] and await stream.next_batch(timeout=1) is None
    assert len(_replay(settings)) == 3  # the log's end now
    assert _replay(settings, ends=ends) == got  # a cut given as end offsets

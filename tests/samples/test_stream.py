"""SampleStream on the real broker: batches from the samples topic, commits, and a restart that resumes."""

from __future__ import annotations

import pytest

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.records import event
from agl_events.log.writer import EventWriter
from agl_events.samples.batching import BatchPolicy
from agl_events.samples.model import Sample, sample_fields
from agl_events.samples.stream import SampleStream
from agl_events.types import Triplet

pytestmark = pytest.mark.kafka


def _sample(rid: str, group: str, generation: int) -> Sample:
    triplet = Triplet(prompt={"token_ids": [1, 2]}, response={"token_ids": [3], "logprobs": [-0.5]}, reward=1.0,
                      metadata={"response_id": f"resp-{rid}"})
    return Sample(sample_id=f"{rid}:a", rollout_id=rid, attempt_id="a", group_id=group, group_size=2,
                  resources_id=f"rs-{generation}", resources_generation=generation, mode="train",
                  status="succeeded", final_reward=1.0, input={"task": group}, adapter="test", triplets=[triplet])


def _write(settings: Settings, samples: list[Sample]) -> None:
    writer = EventWriter(settings.bootstrap_servers, settings.experiment, AvroCodec(), producer_id="test")
    writer.append_sync([event("SampleAdded", s.rollout_id, 0.0, "test", **sample_fields(s)) for s in samples])
    writer.close()


def _stream(settings: Settings, generation: list[int], **policy: object) -> SampleStream:
    async def current() -> int:
        return generation[0]

    return SampleStream(settings.bootstrap_servers, settings.experiment, AvroCodec(), BatchPolicy(**policy),
                        current_generation=current, poll_timeout=0.05)


async def test_batches_are_whole_groups_and_a_restarted_stream_resumes_after_the_commit(settings: Settings) -> None:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    generation = [3]
    _write(settings, [_sample("r1", "a", 3), _sample("r2", "b", 3), _sample("old", "o", 1),
                      _sample("r3", "a", 3), _sample("r1", "a", 3)])  # a stale one, and a re-emit of r1
    async with _stream(settings, generation, batch_size=2, max_staleness=1) as stream:
        batch = await stream.next_batch(timeout=30)
        assert batch is not None and sorted(s.rollout_id for s in batch.samples) == ["r1", "r3"]  # across partitions
        assert batch.samples[0].triplets[0].response == {"token_ids": [3], "logprobs": [-0.5]}
        assert await stream.next_batch(timeout=1) is None  # group b waits for its second sample
        assert stream.stats.skipped_stale == 1 and stream.held == 1
        await stream.commit()
    _write(settings, [_sample("r4", "b", 3), _sample("r5", "c", 3), _sample("r6", "c", 3)])
    async with _stream(settings, generation, batch_size=2, max_staleness=1) as resumed:
        got = [await resumed.next_batch(timeout=30) for _ in range(2)]
        assert sorted(sorted(s.rollout_id for s in b.samples) for b in got if b is not None) == [["r2", "r4"],
                                                                                                ["r5", "r6"]]
        await resumed.commit()

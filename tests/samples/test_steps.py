"""Step records and their accounting (pure): what a step names, what a restarted trainer skips, and the check
that every sample on the topic was trained once, dropped once, or not consumed yet."""

from __future__ import annotations

from agl_events.samples.batching import Batcher, BatchPolicy
from agl_events.samples.model import Sample
from agl_events.samples.steps import SampleRef, StepRecord, account, accounted_ids, last_step, mean_reward, refs

P0, P1 = ("agl.x.samples", 0), ("agl.x.samples", 1)


def _sample(rid: str, group: str, generation: int, reward: float = 0.0) -> Sample:
    return Sample(sample_id=f"{rid}:a", rollout_id=rid, attempt_id="a", group_id=group, group_size=2,
                  resources_generation=generation, mode="train", status="succeeded", final_reward=reward,
                  adapter="t", triplets=[])


def _ref(rid: str, partition: int, offset: int) -> SampleRef:
    return SampleRef(sample_id=f"{rid}:a", partition=partition, offset=offset)


def _record(step: int, trained: list[SampleRef], dropped: list[SampleRef], offsets: dict[int, int]) -> StepRecord:
    return StepRecord(step=step, version=step + 2, weights_uri=f"file:///v{step + 2}.pt", time=0.0, trainer="t",
                      trained=trained, dropped=dropped, offsets=offsets)


def test_a_batch_names_where_each_sample_was_read_and_stale_ones_are_kept_until_drained() -> None:
    batcher = Batcher(BatchPolicy(batch_size=2, max_staleness=1), keep_stale=True)
    batcher.offer(_sample("old", "g0", generation=1), P0, 0, current=3)  # 2 behind: skipped at once
    batcher.offer(_sample("w", "g1", generation=2), P1, 0, current=3)  # waits for its group...
    batcher.offer(_sample("a", "g2", generation=3, reward=1.0), P0, 1, current=3)
    batcher.offer(_sample("b", "g2", generation=3), P1, 1, current=3)
    batch = batcher.take(current=4)  # ...which went stale while waiting
    assert batch is not None
    assert refs(batch.consumed) == [_ref("a", 0, 1), _ref("b", 1, 1)] and mean_reward(batch.samples) == 0.5
    assert refs(batcher.drain_stale()) == [_ref("old", 0, 0), _ref("w", 1, 0)]
    assert batcher.drain_stale() == [] and batcher.stats.skipped_stale == 2
    assert batcher.committable() == {P0: 2, P1: 2}


def test_a_batcher_told_what_committed_steps_took_skips_those_samples() -> None:
    batcher = Batcher(BatchPolicy(batch_size=2))
    batcher.known(accounted_ids([_record(0, [_ref("a", 0, 1)], [_ref("old", 0, 0)], {0: 0})]))
    for offset, rid in enumerate(["old", "a", "b", "c"]):
        batcher.offer(_sample(rid, "g", generation=1), P0, offset, None)
    batch = batcher.take(None)
    assert batch is not None and [s.rollout_id for s in batch.samples] == ["b", "c"]
    assert batcher.stats.duplicates == 2


def test_a_record_survives_its_json_form() -> None:
    record = _record(3, [_ref("a", 0, 1)], [_ref("b", 2, 7)], {0: 2, 1: 0, 2: 8})
    assert StepRecord.decode(record.encode()) == record
    assert last_step([_record(0, [], [], {}), record, _record(1, [], [], {})]) == record
    assert last_step([]) is None and mean_reward([]) is None


TOPIC = [_ref("a", 0, 0), _ref("b", 0, 1), _ref("c", 0, 2), _ref("d", 1, 0), _ref("e", 1, 1), _ref("v", 1, 2)]
WANTED = {"v:a": False}  # a val sample: read and filtered out, by no step


def test_every_sample_is_trained_dropped_or_unconsumed_exactly_once() -> None:
    records = [_record(0, [_ref("a", 0, 0), _ref("d", 1, 0)], [], {0: 1, 1: 1}),
               _record(1, [_ref("c", 0, 2)], [_ref("b", 0, 1)], {0: 2, 1: 1})]  # b stale; c taken above the commit
    result = account(records, TOPIC, WANTED)
    assert result.exactly_once
    assert (result.trained, result.dropped) == ({"a:a", "d:a", "c:a"}, {"b:a"})
    assert result.unconsumed == {"e:a", "v:a"}


def test_twice_skipped_and_unknown_samples_are_violations() -> None:
    twice = account([_record(0, [_ref("a", 0, 0)], [], {0: 1}), _record(1, [_ref("a", 0, 0)], [], {0: 1})],
                    TOPIC, WANTED)
    assert twice.twice == {"a:a"} and not twice.exactly_once
    skipped = account([_record(0, [_ref("a", 0, 0)], [], {0: 3, 1: 3})], TOPIC, WANTED)
    assert skipped.missed == {"b:a", "c:a", "d:a", "e:a"} and not skipped.exactly_once  # v is filtered: fine
    unknown = account([_record(0, [_ref("z", 0, 9)], [], {})], TOPIC, WANTED)
    assert unknown.unknown == {"z:a"} and not unknown.exactly_once

"""The batcher: sizes, complete groups, staleness, dedupe, and the offsets a trainer may commit."""

from __future__ import annotations

from agl_events.samples.batching import Batcher, BatchPolicy
from agl_events.samples.generations import generation_of, is_stale
from agl_events.samples.model import Sample

P0, P1 = ("agl.x.samples", 0), ("agl.x.samples", 1)


def _sample(rid: str, group: str = "g", size: int | None = None, generation: int | None = None,
            mode: str = "train") -> Sample:
    return Sample(sample_id=f"{rid}:a", rollout_id=rid, attempt_id="a", group_id=group, group_size=size,
                  resources_generation=generation, mode=mode, status="succeeded", adapter="t", triplets=[])


def test_ungrouped_samples_come_in_batches_of_the_size_asked() -> None:
    batcher = Batcher(BatchPolicy(batch_size=3, grouped=False))
    for i in range(7):
        batcher.offer(_sample(f"r{i}", size=4), P0, i, None)
    first, second = batcher.take(None), batcher.take(None)
    assert first is not None and second is not None and batcher.take(None) is None
    assert [s.rollout_id for s in first.samples] == ["r0", "r1", "r2"]
    assert [s.rollout_id for s in second.samples] == ["r3", "r4", "r5"]
    partial = batcher.take(None, partial=True)
    assert partial is not None and [s.rollout_id for s in partial.samples] == ["r6"]


def test_groups_are_batched_only_when_complete_and_whole() -> None:
    batcher = Batcher(BatchPolicy(batch_size=4))
    for i, group in enumerate(["a", "b", "a", "b", "c", "a"]):  # groups of 3 from each sample's own size
        batcher.offer(_sample(f"r{i}", group, size=3), P0 if i % 2 else P1, i, None)
    assert batcher.take(None) is None  # only a is complete (3 < 4)
    batcher.offer(_sample("r6", "b", size=3), P0, 6, None)
    batch = batcher.take(None)
    assert batch is not None
    assert [[s.rollout_id for s in g] for g in batch.groups] == [["r0", "r2", "r5"], ["r1", "r3", "r6"]]
    assert batcher.held == 1 and batcher.stats.batched == 6


def test_the_policy_group_size_overrides_the_samples() -> None:
    batcher = Batcher(BatchPolicy(batch_size=2, group_size=2))
    batcher.offer(_sample("r0", "a", size=5), P0, 0, None)
    batcher.offer(_sample("r1", "a", size=5), P0, 1, None)
    batch = batcher.take(None)
    assert batch is not None and len(batch) == 2


def test_stale_samples_are_skipped_and_counted_and_held_groups_expire() -> None:
    batcher = Batcher(BatchPolicy(batch_size=2, max_staleness=1))
    batcher.offer(_sample("old", "o", size=2, generation=1), P0, 0, current=3)  # 2 behind: skipped
    batcher.offer(_sample("ok", "k", size=2, generation=2), P0, 1, current=3)  # 1 behind: held
    batcher.offer(_sample("new", "n", size=1, generation=3), P0, 2, current=3)
    assert batcher.stats.skipped_stale == 1 and batcher.held == 2
    assert batcher.take(current=4) is None  # generation 4 published: the waiting group of 2 is now too old
    assert batcher.stats.skipped_stale == 2
    unversioned = Batcher(BatchPolicy(batch_size=1, max_staleness=0))
    unversioned.offer(_sample("u", size=1, generation=None), P0, 0, current=9)
    assert unversioned.take(9) is not None


def test_duplicates_and_other_modes_are_dropped() -> None:
    batcher = Batcher(BatchPolicy(batch_size=1, grouped=False))
    batcher.offer(_sample("r0"), P0, 0, None)
    batcher.offer(_sample("r0"), P0, 5, None)  # a re-emit: same sample id
    batcher.offer(_sample("v0", mode="val"), P0, 6, None)
    assert batcher.stats.duplicates == 1 and batcher.stats.skipped_filtered == 1 and batcher.stats.accepted == 1


def test_committable_offsets_stop_at_the_first_sample_still_held() -> None:
    batcher = Batcher(BatchPolicy(batch_size=2))
    batcher.offer(_sample("r0", "a", size=2), P0, 10, None)
    batcher.offer(_sample("r1", "b", size=2), P0, 11, None)
    batcher.offer(_sample("r2", "a", size=2), P1, 20, None)
    assert batcher.committable() == {P0: 10, P1: 20}  # nothing handed out yet
    assert batcher.take(None) is not None  # group a
    assert batcher.committable() == {P0: 11, P1: 21}  # b (offset 11) still waits


def test_a_revoked_partition_takes_its_samples_and_leaves_the_group_waiting() -> None:
    batcher = Batcher(BatchPolicy(batch_size=2))
    batcher.offer(_sample("r0", "a", size=2), P0, 0, None)
    batcher.offer(_sample("r1", "a", size=2), P1, 0, None)
    batcher.revoke([P1])
    assert batcher.take(None) is None and batcher.held == 1 and batcher.stats.dropped_revoked == 1
    assert batcher.committable() == {P0: 0}
    batcher.offer(_sample("r1", "a", size=2), P1, 0, None)  # the partition came back: read again, accepted
    assert batcher.take(None) is not None


def test_generations_rank_by_create_time_and_staleness_counts_them() -> None:
    snapshots = [(3.0, "c"), (1.0, "a"), (2.0, "b")]
    assert [generation_of(r, snapshots) for r in ("a", "b", "c", "z", None)] == [1, 2, 3, None, None]
    assert is_stale(1, 3, 1) and not is_stale(2, 3, 1) and not is_stale(1, 3, None) and not is_stale(None, 3, 0)

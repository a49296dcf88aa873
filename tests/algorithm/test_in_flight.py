"""Pipelined GRPO's bookkeeping of groups in flight, alone and driven together with the sample stream's
batcher (both pure), as the loop drives them: enqueue ahead, take a batch, publish, give up the stale."""

from __future__ import annotations

from agl_events.algorithm.in_flight import InFlight
from agl_events.samples.batching import Batcher, BatchPolicy, SampleBatch
from agl_events.samples.model import Sample


def _group(group_id: str, version: int, size: int = 2) -> list[Sample]:
    return [Sample(sample_id=f"{group_id}-{n}", rollout_id=f"{group_id}-{n}", attempt_id="a", group_id=group_id,
                   group_size=size, resources_generation=version, mode="train", status="succeeded",
                   final_reward=float(n), adapter="test", triplets=[]) for n in range(size)]


def _finish(batcher: Batcher, group_id: str, version: int, current: int) -> None:
    """The runners finished the group's rollouts: its samples reach the stream's batcher."""
    for n, sample in enumerate(_group(group_id, version)):
        batcher.offer(sample, ("samples", 0), hash((group_id, n)) % 10_000, current)


def _ids(batch: SampleBatch | None) -> list[str]:
    assert batch is not None
    return sorted(group[0].group_id for group in batch.groups)


def test_synchronous_the_loop_enqueues_exactly_the_groups_of_one_step() -> None:
    flight = InFlight(groups_per_step=8, max_staleness=0)
    for step in range(3):
        assert flight.wanted(steps_left=3 - step) == 8
        flight.add([f"s{step}g{n}" for n in range(8)], version=step + 1)
        assert flight.train([f"s{step}g{n}" for n in range(8)]) == [step + 1] * 8
        assert flight.publish(step + 2) == 0
    assert (flight.enqueued, flight.trained, flight.dropped, flight.pending) == (24, 24, 0, 0)


def test_pipelined_the_loop_keeps_k_plus_one_steps_in_flight_but_never_more_than_it_will_train() -> None:
    flight = InFlight(groups_per_step=8, max_staleness=2)
    assert flight.wanted(steps_left=10) == 24
    flight.add([f"g{n}" for n in range(24)], version=1)
    flight.add(["g0"], version=1)  # the same group twice is one group
    assert flight.enqueued == 24
    flight.train([f"g{n}" for n in range(8)] + ["from-a-previous-trainer"])
    assert flight.trained == 8 and flight.wanted(steps_left=9) == 8
    assert flight.wanted(steps_left=2) == 0  # 16 in flight already cover the last two steps


def test_groups_more_than_k_versions_old_are_given_up_when_a_version_is_published() -> None:
    flight = InFlight(groups_per_step=2, max_staleness=1)
    flight.add(["a", "b"], version=1)
    flight.add(["c"], version=2)
    assert flight.publish(2) == 0  # one version behind: still within the bound
    assert flight.publish(3) == 2  # a and b are two behind now
    assert flight.train(["c"]) == [2]
    assert (flight.enqueued, flight.trained, flight.dropped, flight.pending) == (3, 1, 2, 0)


def test_a_slow_group_is_skipped_by_the_batcher_and_given_up_by_the_loop_then_replaced() -> None:
    """max_staleness=1, 2 groups of 2 samples per step; group g1 is slow. Versions double as resources
    generations here, as they do for a GRPO run that alone publishes resources."""
    flight = InFlight(groups_per_step=2, max_staleness=1)
    batcher = Batcher(BatchPolicy(batch_size=4, group_size=2, max_staleness=1))

    # step 0, weights v1: two steps' worth enqueued ahead; g1 is slow, g3 done but not needed yet
    assert flight.wanted(steps_left=5) == 4
    flight.add(["g0", "g1", "g2", "g3"], version=1)
    for gid in ("g0", "g2", "g3"):
        _finish(batcher, gid, version=1, current=1)
    batch = batcher.take(current=1)
    assert _ids(batch) == ["g0", "g2"] and flight.train(_ids(batch)) == [1, 1]
    assert flight.publish(2) == 0

    # step 1, weights v2: two more under v2 keep two steps' worth in flight; the batch mixes lags 1 and 0
    assert flight.wanted(steps_left=4) == 2
    flight.add(["g4", "g5"], version=2)
    _finish(batcher, "g4", version=2, current=2)
    batch = batcher.take(current=2)
    assert _ids(batch) == ["g3", "g4"] and sorted(2 - v for v in flight.train(_ids(batch))) == [0, 1]
    assert flight.publish(3) == 1  # g1, enqueued under v1, is two versions behind v3: given up

    # step 2, weights v3: g1 finally finishes, and the batcher skips its samples; the loop replaces g1
    _finish(batcher, "g1", version=1, current=3)
    assert batcher.stats.skipped_stale == 2
    assert flight.wanted(steps_left=3) == 3  # only g5 still in flight
    flight.add(["g6", "g7", "g8"], version=3)
    for gid, version in (("g5", 2), ("g6", 3)):
        _finish(batcher, gid, version, current=3)
    batch = batcher.take(current=3)
    assert _ids(batch) == ["g5", "g6"] and sorted(3 - v for v in flight.train(_ids(batch))) == [0, 1]
    assert flight.publish(4) == 0
    assert (flight.enqueued, flight.trained, flight.dropped, flight.pending) == (9, 6, 1, 2)
    assert batcher.stats.batched == 12 and batcher.held == 0

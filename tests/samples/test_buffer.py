"""SampleBuffer: spans wait for their rollout's RolloutFinished, which makes exactly one sample per attempt.

The buffer is the processor's state machine without Kafka: a fold decides, a commit writes (state and
position together). What is checked: a sample is built from its attempt's spans only, in sequence
order; nothing is written before the commit, so a fold repeated after a crash builds the same sample;
after the commit the attempt's later spans and repeated markers are ignored; an adapter that raises
gives a dead letter, not a stop; state and position survive reopening the RocksDB folder.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from agl_events.samples.buffer import Folded, SampleBuffer, buffered_of
from agl_events.samples.build import build_sample
from agl_events.views.kv import DictKV
from agl_events.views.rocks import RocksKV
from tests.samples import TOPIC, finished, span_added, token_triplets

build = functools.partial(build_sample, adapter=token_triplets, adapter_name="token_triplets")


def fold(buffer: SampleBuffer, events: list, through: int | None = None) -> Folded:
    return buffer.fold(TOPIC, 0, events, max(e.offset for e in events) + 1 if through is None else through, build)


def test_a_finished_attempt_becomes_one_sample_from_its_own_spans_in_sequence_order() -> None:
    buffer = SampleBuffer(DictKV())
    folded = fold(buffer, [
        span_added("ro-1", "at-old", 1, 0, prompt_token_ids=[9]),  # an earlier attempt of the same rollout
        span_added("ro-1", "at-1", 3, 1, prompt_token_ids=[3]),  # sequence ids need not come in order
        span_added("ro-2", "at-2", 1, 2, prompt_token_ids=[20]),  # another rollout, still running
        span_added("ro-1", "at-1", 2, 3, prompt_token_ids=[2]),
        finished("ro-1", "at-1", 4),
    ])
    [done] = folded.finished
    assert done.error is None and done.sample is not None and done.sample_id == "ro-1:at-1"
    assert [t.prompt["token_ids"] for t in done.sample.triplets] == [[2], [3]]
    assert buffer.positions == {} and buffer.stats() == {"buffered_spans": 0, "sampled": 0}  # nothing written

    buffer.commit(folded)
    assert buffer.positions == {(TOPIC, 0): 5}
    # ro-1's spans are gone, the earlier attempt's too; ro-2's wait for its own marker.
    assert buffer.stats() == {"buffered_spans": 1, "sampled": 1}
    assert list(buffer.kv.scan(buffered_of("ro-1"))) == []
    assert [k for k, _ in buffer.kv.scan(buffered_of("ro-2"))] == [f"b/ro-2/at-2/{1:016d}/{2:016d}"]


def test_a_fold_repeated_before_its_commit_builds_the_same_sample() -> None:
    """The crash window: samples emitted, state not yet written. The replay must say the same thing."""
    buffer = SampleBuffer(DictKV())
    fold_ = functools.partial(fold, buffer, [span_added("ro-1", "at-1", 1, 0, prompt_token_ids=[1]),
                                             finished("ro-1", "at-1", 1)])
    first, again = fold_(), fold_()
    assert [f.sample for f in first.finished] == [f.sample for f in again.finished]
    assert first.changes == again.changes
    buffer.commit(again)
    with pytest.raises(RuntimeError, match="stale fold"):
        buffer.commit(first)


def test_after_the_sample_late_spans_and_repeated_markers_are_ignored_but_a_new_attempt_samples_again() -> None:
    buffer = SampleBuffer(DictKV())
    buffer.commit(fold(buffer, [span_added("ro-1", "at-1", 1, 0), finished("ro-1", "at-1", 1)]))
    late = fold(buffer, [span_added("ro-1", "at-1", 2, 2), finished("ro-1", "at-1", 3)])
    assert (late.late_spans, late.repeated, late.finished) == (1, 1, [])
    buffer.commit(late)
    assert buffer.stats() == {"buffered_spans": 0, "sampled": 1}

    # The rollout was requeued and ran again: a new attempt, a new sample id.
    again = fold(buffer, [span_added("ro-1", "at-2", 3, 4, prompt_token_ids=[5]), finished("ro-1", "at-2", 5)])
    [sample] = [f.sample for f in again.finished]
    assert sample is not None and sample.sample_id == "ro-1:at-2"
    assert [t.prompt["token_ids"] for t in sample.triplets] == [[5]]


def test_an_adapter_that_raises_makes_a_dead_letter_and_the_fold_goes_on() -> None:
    buffer = SampleBuffer(DictKV())
    folded = fold(buffer, [
        span_added("ro-1", "at-1", 1, 0, name="unadaptable"), finished("ro-1", "at-1", 1),
        span_added("ro-2", "at-2", 1, 2, prompt_token_ids=[1]), finished("ro-2", "at-2", 3),
    ])
    bad, good = folded.finished
    assert bad.sample is None and isinstance(bad.error, ValueError) and bad.event.offset == 1
    assert good.sample is not None and good.error is None
    buffer.commit(folded)
    assert buffer.stats() == {"buffered_spans": 0, "sampled": 2}  # the failed rollout is done with too
    assert fold(buffer, [finished("ro-1", "at-1", 4)]).repeated == 1


def test_positions_skip_redelivered_events_and_cover_dead_lettered_records() -> None:
    buffer = SampleBuffer(DictKV())
    buffer.commit(fold(buffer, [span_added("ro-1", "at-1", 1, 0)], through=3))  # offsets 1, 2 undecodable
    assert buffer.positions == {(TOPIC, 0): 3}
    again = fold(buffer, [span_added("ro-1", "at-1", 1, 0), span_added("ro-1", "at-1", 2, 3)])
    assert again.redelivered == 1
    buffer.commit(again)
    assert buffer.stats()["buffered_spans"] == 2


def test_state_and_position_survive_reopening_the_folder(tmp_path: Path) -> None:
    buffer = SampleBuffer(RocksKV(tmp_path / "p0"))
    buffer.commit(fold(buffer, [span_added("ro-1", "at-1", 1, 0, prompt_token_ids=[1]),
                                span_added("ro-1", "at-1", 2, 1, prompt_token_ids=[2])]))
    buffer.close()

    reopened = SampleBuffer(RocksKV(tmp_path / "p0"))
    assert reopened.positions == {(TOPIC, 0): 2}
    folded = fold(reopened, [finished("ro-1", "at-1", 2)])
    [sample] = [f.sample for f in folded.finished]
    assert sample is not None and [t.prompt["token_ids"] for t in sample.triplets] == [[1], [2]]
    reopened.close()

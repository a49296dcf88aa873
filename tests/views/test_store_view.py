"""StoreView on both key-value stores: idempotent folds, positions stored with the state, own writes.

Events come from the in-memory store's log, so they are exactly what the commands append.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.store.memory import InMemoryLightningStore
from agl_events.views.kv import KeyValue
from agl_events.views.rocks import RocksKV
from agl_events.views.store_view import StoreView
from tests.reducers.workload import random_run
from tests.store import make_span


@dataclasses.dataclass
class Story:
    """A enqueued, B enqueued, A dequeued and given a span: the log topic by topic, and the key events."""

    events: list[LoggedEvent]
    enqueued: LoggedEvent  # A's RolloutEnqueued
    dequeued: LoggedEvent  # A's RolloutStatusChanged to preparing
    rollout_id: str


@pytest.fixture
async def story() -> Story:
    store = InMemoryLightningStore()
    try:
        a = await store.enqueue_rollout(input="a")
        await store.enqueue_rollout(input="b")
        claimed = await store.dequeue_rollout(worker_id="w-1")
        assert claimed is not None and claimed.rollout_id == a.rollout_id
        await store.add_span(make_span(a.rollout_id, claimed.attempt.attempt_id, 1))
    finally:
        await store.close()
    rollouts = store.log.topics["rollouts"]
    assert [e.kind for e in rollouts[:3]] == ["RolloutEnqueued", "RolloutEnqueued", "RolloutStatusChanged"]
    events = [e for entries in store.log.topics.values() for e in entries]
    return Story(events, rollouts[0], rollouts[2], a.rollout_id)


def state(view: StoreView) -> dict[str, Any]:
    """Everything in the view but its positions and its counts per log partition (what the reducers fold)."""
    return {k: v for k, v in view.scan("") if not k.startswith((keys.POSITIONS, keys.PARTITION_COUNTS))}


def log_ends(events: list[LoggedEvent]) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}
    for e in events:
        ends[(e.topic, e.partition)] = max(ends.get((e.topic, e.partition), 0), e.offset + 1)
    return ends


async def test_folding_a_whole_log_rebuilds_the_live_view_and_stores_its_positions(kv: KeyValue) -> None:
    run = await random_run(seed=0)
    view = StoreView(kv)
    assert view.apply_logged(run.events) == len(run.events)
    assert state(view) == run.view
    assert view.positions == log_ends(run.events)
    assert StoreView(kv).positions == view.positions  # as a restart reads them back


def test_events_already_folded_are_skipped(kv: KeyValue, story: Story) -> None:
    view = StoreView(kv)
    half = len(story.events) // 2
    assert view.apply_logged(story.events[:half]) == half
    assert view.apply_logged(story.events) == len(story.events) - half
    folded = state(view)
    assert view.apply_logged(story.events) == 0
    assert state(view) == folded and view.positions == log_ends(story.events)


def test_one_batch_sees_its_own_earlier_events(kv: KeyValue, story: Story) -> None:
    """The status change finds the rollout that the same batch enqueued, before anything is written."""
    view = StoreView(kv)
    view.apply_logged([story.enqueued, story.dequeued])
    rollout = view.get(keys.rollout(story.rollout_id))
    assert rollout["status"] == "preparing"
    assert view.get(keys.queued(story.rollout_id)) is None


def test_a_failing_batch_stores_neither_its_state_nor_its_positions(kv: KeyValue, story: Story) -> None:
    broken = dataclasses.replace(story.dequeued, offset=story.dequeued.offset + 100, record={"event_id": "x"})
    with pytest.raises(KeyError):
        StoreView(kv).apply_logged([story.enqueued, broken])
    assert list(kv.scan("")) == []
    reopened = StoreView(kv)
    assert reopened.positions == {}
    assert reopened.apply_logged(story.events) == len(story.events)


def test_positions_are_kept_per_topic_and_partition(kv: KeyValue, story: Story) -> None:
    elsewhere = dataclasses.replace(story.dequeued, partition=1, offset=0)
    view = StoreView(kv)
    view.apply_logged([story.enqueued, elsewhere])
    assert view.positions == {("rollouts", 0): 1, ("rollouts", 1): 1}
    assert view.apply_logged([dataclasses.replace(story.dequeued, partition=1, offset=0)]) == 0
    assert StoreView(kv).positions == view.positions


def test_own_events_fold_at_once_and_leave_positions_to_the_reader(kv: KeyValue, story: Story) -> None:
    view = StoreView(kv)
    view.apply_own(story.events)
    assert view.get(keys.rollout(story.rollout_id))["status"] == "running"
    assert view.positions == {} and list(kv.scan(keys.POSITIONS)) == []


def test_the_reader_only_advances_over_own_events_never_rolling_the_view_back(kv: KeyValue, story: Story) -> None:
    view = StoreView(kv)
    view.apply_own([story.enqueued, story.dequeued])
    after_own = state(view)
    assert view.apply_logged([story.enqueued]) == 1  # folding it again would put A back in the queue
    assert state(view) == after_own
    assert view.positions == {("rollouts", 0): story.enqueued.offset + 1}
    view.apply_logged([story.dequeued])
    assert state(view) == after_own


def test_own_events_the_reader_already_folded_are_not_folded_again(kv: KeyValue, story: Story) -> None:
    view = StoreView(kv)
    view.apply_logged([story.enqueued, story.dequeued])
    folded = state(view)
    view.apply_own([story.enqueued])  # a slow acknowledgement, after the reader got there
    assert state(view) == folded


def test_without_tracking_own_events_are_folded_whatever_the_positions(kv: KeyValue, story: Story) -> None:
    """The in-memory store has no reader; its view folds everything it is handed and stores no positions."""
    view = StoreView(kv, track_own=False)
    view.apply_own([story.enqueued, story.dequeued])
    view.apply_own([story.enqueued])
    assert view.get(keys.rollout(story.rollout_id))["status"] == "queuing"
    assert view.positions == {}


def test_a_reopened_rocks_view_resumes_where_it_stopped(tmp_path: Path, story: Story) -> None:
    half = len(story.events) // 2
    first = StoreView(RocksKV(tmp_path / "view"))
    first.apply_logged(story.events[:half])
    first.close()
    resumed = StoreView(RocksKV(tmp_path / "view"))
    try:
        assert resumed.positions == log_ends(story.events[:half])
        assert resumed.apply_logged(story.events) == len(story.events) - half
        complete = StoreView(RocksKV(tmp_path / "complete"))
        complete.apply_logged(story.events)
        assert state(resumed) == state(complete)
        complete.close()
    finally:
        resumed.close()



def test_queue_scans_start_past_taken_entries_and_miss_none_written_before_that(kv: KeyValue, story: Story) -> None:
    """Queue scans start where the last one found the queue's head (RocksDB steps over every claimed entry from
    the queue's start otherwise): an entry written before that point later (a store group's catch-up of a
    partition it takes over: positions of several owners interleave) or after the queue ran empty is still read."""
    b_enqueued = next(e for e in story.events if e.kind == "RolloutEnqueued" and e is not story.enqueued)
    b_enqueued = dataclasses.replace(b_enqueued, offset=story.dequeued.offset + 1)  # folded after A's claim
    late = dataclasses.replace(
        b_enqueued, key="ro-late", offset=b_enqueued.offset + 1, value=None,
        record={**b_enqueued.record, "queue_seq": story.enqueued.record["queue_seq"],
                "rollout": {**b_enqueued.record["rollout"], "rollout_id": "ro-late"}})
    view = StoreView(kv)

    def queue() -> list[str]:
        return [rid for _, rid in view.scan(keys.QUEUE)]

    view.apply_logged([story.enqueued, story.dequeued])
    assert queue() == []
    view.apply_logged([b_enqueued])
    assert queue() == [b_enqueued.key]
    view.apply_logged([late])  # at A's old place, before B's
    assert queue() == ["ro-late", b_enqueued.key]

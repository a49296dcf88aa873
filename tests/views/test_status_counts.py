"""Rollouts by status, counted as the view is written: always the statuses the view holds, however it got there."""

from __future__ import annotations

from collections import Counter

import pytest

from agl_events.reducers import keys
from agl_events.views.kv import KeyValue
from agl_events.views.status_counts import StatusCountingKV
from agl_events.views.store_view import StoreView
from tests.reducers.workload import random_run


def held(kv: KeyValue) -> dict[str, int]:
    """What a full scan says: the truth the counts must equal."""
    return dict(Counter(rollout["status"] for _, rollout in kv.scan(keys.ROLLOUTS)))


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_counts_follow_every_write_once_asked(kv: KeyValue, seed: int) -> None:
    run = await random_run(seed)
    counting = StatusCountingKV(kv)
    view = StoreView(counting)
    half = len(run.events) // 2
    view.apply_logged(run.events[:half])
    assert counting.counts() == held(kv)  # the first demand scans
    view.apply_logged(run.events[half:])
    assert counting.counts() == held(kv) and sum(counting.counts().values()) == kv.get(keys.count("rollouts"))


async def test_counts_survive_a_replay_from_older_positions(kv: KeyValue) -> None:
    """After a crash the view may be ahead of its stored positions, and events fold again over later state."""
    run = await random_run(7)
    counting = StatusCountingKV(kv)
    assert counting.counts() == {}
    StoreView(counting, track_own=True).apply_own(run.events)  # folded at once, positions not advanced
    StoreView(counting).apply_logged(run.events)  # the log read back from offset 0 over the newer state
    assert counting.counts() == held(kv)


def test_deleting_a_rollout_uncounts_it(kv: KeyValue) -> None:
    counting = StatusCountingKV(kv)
    counting.write({keys.rollout("a"): {"status": "queuing"}, keys.rollout("b"): {"status": "queuing"}})
    assert counting.counts() == {"queuing": 2}
    counting.write({keys.rollout("a"): {"status": "running"}, keys.rollout("b"): None, keys.RESOURCES + "x": {}})
    assert counting.counts() == {"running": 1}

"""wait_for_rollouts (§1.8). Correctness only: elapsed times are printed, never asserted."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from agl_events.reducers import keys
from agl_events.store.waits import Waits
from agl_events.types import Rollout, RolloutConfig
from agl_events.views.kv import DictKV
from agl_events.views.store_view import StoreView


async def _finished(store, status="succeeded"):
    ar = await store.start_rollout(input=1)
    await store.update_attempt(ar.rollout_id, "latest", status=status)
    return ar.rollout_id


async def test_already_finished_returns(store):
    rid = await _finished(store)
    start = time.perf_counter()
    got = await store.wait_for_rollouts(rollout_ids=[rid], timeout=10)
    print(f"already finished: {time.perf_counter() - start:.4f}s")
    assert [r.rollout_id for r in got] == [rid]
    assert type(got[0]) is Rollout and got[0].status == "succeeded"


async def test_all_finished_statuses_count(store):
    ids = [await _finished(store, "succeeded"), await _finished(store, "failed")]
    cancelled = await store.enqueue_rollout(input=1)
    await store.update_rollout(cancelled.rollout_id, status="cancelled")
    ids.append(cancelled.rollout_id)
    got = await store.wait_for_rollouts(rollout_ids=ids, timeout=0)
    assert [r.rollout_id for r in got] == ids
    assert [r.status for r in got] == ["succeeded", "failed", "cancelled"]


async def test_timeout_zero_is_a_single_check(store):
    queued = await store.enqueue_rollout(input=1)
    running = await store.start_rollout(input=2)
    done = await _finished(store)
    start = time.perf_counter()
    got = await store.wait_for_rollouts(rollout_ids=[queued.rollout_id, running.rollout_id, done], timeout=0)
    print(f"timeout=0: {time.perf_counter() - start:.4f}s")
    assert [r.rollout_id for r in got] == [done]
    assert await store.wait_for_rollouts(rollout_ids=[queued.rollout_id], timeout=-1) == []


async def test_short_timeout_on_unfinished_returns_empty(store):
    queued = await store.enqueue_rollout(input=1)
    start = time.perf_counter()
    got = await store.wait_for_rollouts(rollout_ids=[queued.rollout_id], timeout=0.1)
    print(f"timeout=0.1 on queued: {time.perf_counter() - start:.4f}s")
    assert got == []
    # requeuing is not finished
    ar = await store.start_rollout(input=1, config=RolloutConfig(max_attempts=2, retry_condition=["failed"]))
    await store.update_attempt(ar.rollout_id, "latest", status="failed")
    assert await store.wait_for_rollouts(rollout_ids=[ar.rollout_id], timeout=0.1) == []


async def test_unknown_ids_are_omitted(store):
    done = await _finished(store)
    got = await store.wait_for_rollouts(rollout_ids=["ro-unknown00000", done], timeout=0.1)
    assert [r.rollout_id for r in got] == [done]
    assert await store.wait_for_rollouts(rollout_ids=["ro-unknown00000"], timeout=0.1) == []
    assert await store.wait_for_rollouts(rollout_ids=[], timeout=0) == []


async def test_rollout_finished_by_another_task_is_returned(store):
    ar = await store.start_rollout(input=1)

    async def finish_later():
        await asyncio.sleep(0.05)
        await store.update_attempt(ar.rollout_id, ar.attempt.attempt_id, status="succeeded")

    start = time.perf_counter()
    finisher = asyncio.create_task(finish_later())
    got = await store.wait_for_rollouts(rollout_ids=[ar.rollout_id], timeout=5)
    print(f"finished while waiting: {time.perf_counter() - start:.4f}s")
    await finisher
    assert [r.rollout_id for r in got] == [ar.rollout_id] and got[0].status == "succeeded"
    assert got[0].end_time is not None


async def test_cancel_by_update_rollout_wakes_waiter(store):
    r = await store.enqueue_rollout(input=1)
    waiter = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[r.rollout_id], timeout=5))
    await asyncio.sleep(0.05)
    await store.update_rollout(r.rollout_id, status="cancelled")
    got = await waiter
    assert [x.status for x in got] == ["cancelled"]


async def test_partial_completion_returns_only_finished(store):
    a = await store.start_rollout(input=1)
    b = await store.start_rollout(input=2)
    waiter = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[a.rollout_id, b.rollout_id], timeout=0.5))
    await asyncio.sleep(0.05)
    await store.update_attempt(b.rollout_id, "latest", status="failed")
    got = await waiter
    assert [r.rollout_id for r in got] == [b.rollout_id]


async def test_wait_is_cancellable(store):
    ar = await store.start_rollout(input=1)
    waiter = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[ar.rollout_id], timeout=None))
    await asyncio.sleep(0.05)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    # the store keeps working after a cancelled wait, and a later wait still sees the completion
    await store.update_attempt(ar.rollout_id, "latest", status="succeeded")
    got = await store.wait_for_rollouts(rollout_ids=[ar.rollout_id], timeout=1)
    assert [r.rollout_id for r in got] == [ar.rollout_id]


async def test_polling_with_timeout_zero_keeps_nothing_behind() -> None:
    """A poll with timeout 0 (Agent Lightning's APO polls so) waits for nothing, so it leaves no waiter: it left
    one per unfinished rollout per poll, kept until the rollout finished (in a read-only store, whose view does
    not move, or for a partition a store group moved away: for good)."""
    view = StoreView(DictKV())
    view.kv.write({keys.rollout("ro-1"): Rollout(rollout_id="ro-1", input=1, start_time=1.0,
                                                 status="running").model_dump(mode="json")})
    waits = Waits(view, lambda: None)

    def futures() -> int:
        return sum(isinstance(o, asyncio.Future) for o in gc.get_objects())

    before = futures()
    for _ in range(100):
        assert await waits.wait(["ro-1"], 0) == []
    assert futures() - before < 10

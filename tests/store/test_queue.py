"""The global FIFO queue: dequeue_rollout, dequeue_many_rollouts and start_attempt (§1.2, §1.3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agl_events.log.memory import InMemoryLog
from agl_events.reducers import keys
from agl_events.types import AttemptedRollout, EnqueueRolloutRequest
from agl_events.views.kv import DictKV
from agl_events.views.store_view import StoreView
from tests.store import ATTEMPT_ID, store_over


async def test_dequeue_is_fifo(store):
    ids = [(await store.enqueue_rollout(input=i)).rollout_id for i in range(4)]
    got = [await store.dequeue_rollout() for _ in range(4)]
    assert [d.rollout_id for d in got] == ids
    assert await store.dequeue_rollout() is None


async def test_dequeue_creates_preparing_attempt_and_syncs_worker(store, clock):
    r = await store.enqueue_rollout(input={"x": 1})
    clock.advance(1.0)  # decisions take the store clock
    before = clock()
    d = await store.dequeue_rollout(worker_id="w1")
    assert isinstance(d, AttemptedRollout) and d.rollout_id == r.rollout_id
    assert d.status == "preparing" and d.input == {"x": 1}
    assert ATTEMPT_ID.match(d.attempt.attempt_id)
    assert d.attempt.sequence_id == 1 and d.attempt.status == "preparing" and d.attempt.worker_id == "w1"
    assert d.attempt.start_time >= before and d.attempt.end_time is None
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.status == "preparing" and got.attempt.attempt_id == d.attempt.attempt_id
    # the worker is synced: busy on this attempt
    w = await store.get_worker_by_id("w1")
    assert w.status == "busy"
    assert w.current_rollout_id == d.rollout_id and w.current_attempt_id == d.attempt.attempt_id
    assert w.last_dequeue_time is not None and w.last_busy_time is not None


async def test_dequeue_without_worker_touches_no_worker(store):
    await store.enqueue_rollout(input=1)
    assert (await store.dequeue_rollout()).attempt.worker_id is None
    assert await store.dequeue_rollout() is None
    assert (await store.query_workers()).total == 0


async def test_empty_dequeue_marks_worker_idle(store):
    assert await store.dequeue_rollout(worker_id="w1") is None
    w = await store.get_worker_by_id("w1")
    assert w.status == "idle" and w.last_dequeue_time is not None and w.last_idle_time is not None
    assert w.current_rollout_id is None and w.current_attempt_id is None
    first_idle, first_dequeue = w.last_idle_time, w.last_dequeue_time
    # already idle: only last_dequeue_time is refreshed
    assert await store.dequeue_rollout(worker_id="w1") is None
    w2 = await store.get_worker_by_id("w1")
    assert w2.status == "idle" and w2.last_idle_time == first_idle and w2.last_dequeue_time > first_dequeue
    assert list(await store.dequeue_many_rollouts(limit=2, worker_id="w1")) == []
    assert (await store.get_worker_by_id("w1")).status == "idle"


async def test_empty_dequeue_after_busy_turns_worker_idle(store):
    await store.enqueue_rollout(input=1)
    await store.dequeue_rollout(worker_id="w1")
    assert (await store.get_worker_by_id("w1")).status == "busy"
    assert await store.dequeue_rollout(worker_id="w1") is None
    w = await store.get_worker_by_id("w1")
    assert w.status == "idle" and w.current_rollout_id is None and w.last_idle_time is not None


async def test_dequeue_preserves_worker_heartbeat_fields(store):
    await store.update_worker("w1", {"cpu": 0.5})
    hb = (await store.get_worker_by_id("w1")).last_heartbeat_time
    await store.enqueue_rollout(input=1)
    await store.dequeue_rollout(worker_id="w1")
    w = await store.get_worker_by_id("w1")
    assert w.status == "busy" and w.heartbeat_stats == {"cpu": 0.5} and w.last_heartbeat_time == hb


async def test_dequeue_skips_rollouts_no_longer_queuing(store):
    statuses = ["running", "cancelled", "succeeded", "failed", "preparing"]
    moved = [await store.enqueue_rollout(input=s) for s in statuses]
    last = await store.enqueue_rollout(input="last")
    for r, status in zip(moved, statuses, strict=True):
        await store.update_rollout(r.rollout_id, status=status)
    d = await store.dequeue_rollout()
    assert d is not None and d.rollout_id == last.rollout_id
    assert await store.dequeue_rollout() is None
    for r, status in zip(moved, statuses, strict=True):
        got = await store.get_rollout_by_id(r.rollout_id)
        assert got.status == status and type(got).__name__ == "Rollout"  # no attempt was created


async def test_requeued_rollout_reenters_at_tail(store):
    # Deliberate difference from upstream: upstream keeps the stale queue entry, so a rollout moved out of
    # queuing and back before being popped keeps its old position. Ours drops the entry when the rollout
    # leaves queuing, so it re-enters at the tail.
    a = await store.enqueue_rollout(input="a")
    b = await store.enqueue_rollout(input="b")
    await store.update_rollout(a.rollout_id, status="running")
    await store.update_rollout(a.rollout_id, status="queuing")
    order = [(await store.dequeue_rollout()).rollout_id for _ in range(2)]
    assert order == [b.rollout_id, a.rollout_id]


async def test_dequeue_many_respects_limit_and_fifo(store):
    ids = [(await store.enqueue_rollout(input=i)).rollout_id for i in range(5)]
    first = await store.dequeue_many_rollouts(limit=2, worker_id="w1")
    assert [d.rollout_id for d in first] == ids[:2]
    assert all(d.attempt.worker_id == "w1" and d.attempt.sequence_id == 1 for d in first)
    rest = await store.dequeue_many_rollouts(limit=10)
    assert [d.rollout_id for d in rest] == ids[2:]
    assert list(await store.dequeue_many_rollouts(limit=3)) == []


async def test_dequeue_many_syncs_worker_to_last(store):
    for i in range(3):
        await store.enqueue_rollout(input=i)
    got = await store.dequeue_many_rollouts(limit=3, worker_id="w1")
    w = await store.get_worker_by_id("w1")
    assert w.status == "busy"
    assert w.current_rollout_id == got[-1].rollout_id and w.current_attempt_id == got[-1].attempt.attempt_id


async def test_dequeue_many_nonpositive_limit_returns_empty(store):
    await store.enqueue_rollout(input=1)
    assert list(await store.dequeue_many_rollouts(limit=0)) == []
    assert list(await store.dequeue_many_rollouts(limit=-1)) == []
    assert (await store.dequeue_rollout()) is not None  # the queue was not touched


async def test_dequeue_many_skips_non_queuing(store):
    a, b, c = [await store.enqueue_rollout(input=i) for i in range(3)]
    await store.update_rollout(b.rollout_id, status="cancelled")
    got = await store.dequeue_many_rollouts(limit=3)
    assert [d.rollout_id for d in got] == [a.rollout_id, c.rollout_id]


# -- start_attempt ---------------------------------------------------------------------------------------


async def test_start_attempt_ignores_max_attempts(store):
    ar = await store.start_rollout(input=1)  # default max_attempts=1
    await store.update_attempt(ar.rollout_id, ar.attempt.attempt_id, status="failed")
    assert (await store.get_rollout_by_id(ar.rollout_id)).status == "failed"
    retry = await store.start_attempt(ar.rollout_id, worker_id="w2")
    assert isinstance(retry, AttemptedRollout)
    assert retry.status == "preparing" and retry.attempt.sequence_id == 2
    assert retry.attempt.status == "preparing" and retry.attempt.worker_id == "w2"
    third = await store.start_attempt(ar.rollout_id)
    assert third.attempt.sequence_id == 3
    attempts = await store.query_attempts(ar.rollout_id)
    assert [a.sequence_id for a in attempts] == [1, 2, 3]
    assert (await store.get_latest_attempt(ar.rollout_id)).attempt_id == third.attempt.attempt_id
    w = await store.get_worker_by_id("w2")
    assert w.status == "busy" and w.current_attempt_id == retry.attempt.attempt_id
    with pytest.raises(ValueError, match="Rollout ro-unknown not found"):
        await store.start_attempt("ro-unknown")


async def test_start_attempt_does_not_touch_queue(store):
    r = await store.enqueue_rollout(input=1)
    started = await store.start_attempt(r.rollout_id)
    assert started.status == "preparing" and started.attempt.sequence_id == 1
    assert await store.dequeue_rollout() is None  # no longer queuing, so the queued entry is skipped


async def test_dequeue_after_manual_requeue_counts_existing_attempts(store):
    ar = await store.start_rollout(input=1)
    await store.start_attempt(ar.rollout_id)
    await store.update_rollout(ar.rollout_id, status="requeuing")
    d = await store.dequeue_rollout()
    assert d.rollout_id == ar.rollout_id and d.attempt.sequence_id == 3


class _CountingKV(DictKV):
    """Counts the queue entries scans hand out: what a claim reads of the queue."""

    def __init__(self) -> None:
        super().__init__()
        self.queue_entries_read = 0

    def scan(self, prefix: str, start: str | None = None) -> Iterator[tuple[str, Any]]:
        for entry in super().scan(prefix, start):
            self.queue_entries_read += entry[0].startswith(keys.QUEUE)
            yield entry


async def test_a_claim_reads_the_head_of_a_deep_queue_not_all_of_it() -> None:
    kv = _CountingKV()
    store, _ = store_over(StoreView(kv), InMemoryLog())
    try:
        queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(300)])
        kv.queue_entries_read = 0
        claimed = await store.dequeue_many_rollouts(limit=3, worker_id="w1")
        assert [c.rollout_id for c in claimed] == [q.rollout_id for q in queued[:3]]
        assert kv.queue_entries_read <= 4  # the three it takes and at most the one after: not 300
    finally:
        await store.close()

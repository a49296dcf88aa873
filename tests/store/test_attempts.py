"""update_attempt, query_attempts and get_latest_attempt: errors, propagation, retries, worker sync (§1.2, §1.3)."""

from __future__ import annotations

import pytest

from agl_events.types import Attempt, PaginatedResult, RolloutConfig

RETRY_ON_FAILED = RolloutConfig(max_attempts=2, retry_condition=["failed"])


# -- errors, in the order upstream checks them ---------------------------------------------------------


async def test_update_attempt_unknown_rollout_then_no_attempts(store):
    with pytest.raises(ValueError, match="Rollout ro-missing not found"):
        await store.update_attempt("ro-missing", "latest", status="failed")
    r = await store.enqueue_rollout(input=1)
    for aid in ("latest", "at-12345678"):  # raised even for a concrete attempt id
        with pytest.raises(ValueError, match=f"No attempts found for rollout {r.rollout_id}"):
            await store.update_attempt(r.rollout_id, aid, status="failed")


async def test_update_attempt_unknown_attempt(store):
    ar = await store.start_rollout(input=1)
    with pytest.raises(ValueError, match=f"Attempt at-00000000 not found for rollout {ar.rollout_id}"):
        await store.update_attempt(ar.rollout_id, "at-00000000", status="failed")
    other = await store.start_rollout(input=2)
    with pytest.raises(ValueError, match=f"Attempt {other.attempt.attempt_id} not found for rollout"):
        await store.update_attempt(ar.rollout_id, other.attempt.attempt_id, status="failed")


# -- fields and end_time --------------------------------------------------------------------------------


async def test_end_time_only_for_failed_and_succeeded(store, clock):
    for status in ("failed", "succeeded"):
        ar = await store.start_rollout(input=1)
        clock.advance(1.0)  # decisions take the store clock
        before = clock()
        att = await store.update_attempt(ar.rollout_id, ar.attempt.attempt_id, status=status)
        assert isinstance(att, Attempt) and att.status == status
        assert att.end_time is not None and att.end_time >= before
        assert (await store.get_latest_attempt(ar.rollout_id)).end_time == att.end_time
    for status in ("timeout", "unresponsive", "running", "preparing"):
        ar = await store.start_rollout(input=1)
        att = await store.update_attempt(ar.rollout_id, "latest", status=status)
        assert att.status == status and att.end_time is None


async def test_update_attempt_explicit_fields(store):
    ar = await store.start_rollout(input=1)
    att = await store.update_attempt(ar.rollout_id, "latest", last_heartbeat_time=123.5, metadata={"m": [1, 2]})
    assert att.last_heartbeat_time == 123.5 and att.metadata == {"m": [1, 2]}
    assert att.status == "preparing" and att.worker_id is None
    got = await store.get_latest_attempt(ar.rollout_id)
    assert got.model_dump() == att.model_dump()
    att = await store.update_attempt(ar.rollout_id, ar.attempt.attempt_id, metadata=None)
    assert att.metadata is None and att.last_heartbeat_time == 123.5


# -- propagation to the rollout -------------------------------------------------------------------------


async def test_latest_attempt_drives_rollout_without_retry(store):
    expected = {"running": "running", "succeeded": "succeeded", "failed": "failed", "timeout": "failed",
                "unresponsive": "failed", "preparing": "preparing"}
    for attempt_status, rollout_status in expected.items():
        ar = await store.start_rollout(input=1)
        await store.update_attempt(ar.rollout_id, "latest", status=attempt_status)
        r = await store.get_rollout_by_id(ar.rollout_id)
        assert r.status == rollout_status, attempt_status
        assert (r.end_time is not None) == (rollout_status in ("failed", "succeeded"))
        assert r.attempt.status == attempt_status


async def test_only_latest_attempt_propagates(store):
    ar = await store.start_rollout(input=1)
    second = await store.start_attempt(ar.rollout_id)
    old = await store.update_attempt(ar.rollout_id, ar.attempt.attempt_id, status="succeeded")
    assert old.status == "succeeded"
    r = await store.get_rollout_by_id(ar.rollout_id)
    assert r.status == "preparing" and r.end_time is None
    assert r.attempt.attempt_id == second.attempt.attempt_id
    await store.update_attempt(ar.rollout_id, second.attempt.attempt_id, status="succeeded")
    r = await store.get_rollout_by_id(ar.rollout_id)
    assert r.status == "succeeded" and r.end_time is not None
    # propagation to a status the rollout already has changes nothing
    ar = await store.start_rollout(input=1)
    await store.update_attempt(ar.rollout_id, "latest", status="running")
    await store.update_attempt(ar.rollout_id, "latest", status="running")
    r = await store.get_rollout_by_id(ar.rollout_id)
    assert r.status == "running" and r.end_time is None


async def test_retry_requeues_and_second_dequeue_gets_sequence_two(store):
    r = await store.enqueue_rollout(input=1, config=RETRY_ON_FAILED)
    first = await store.dequeue_rollout(worker_id="w1")
    await store.update_attempt(r.rollout_id, first.attempt.attempt_id, status="failed")
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.status == "requeuing" and got.end_time is None
    second = await store.dequeue_rollout(worker_id="w2")
    assert second is not None and second.rollout_id == r.rollout_id
    assert second.attempt.sequence_id == 2 and second.status == "preparing"
    assert second.attempt.attempt_id != first.attempt.attempt_id
    # max_attempts exhausted: the second failure is final
    await store.update_attempt(r.rollout_id, "latest", status="failed")
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.status == "failed" and got.end_time is not None
    assert await store.dequeue_rollout() is None
    assert [a.status for a in await store.query_attempts(r.rollout_id)] == ["failed", "failed"]


async def test_retry_condition_not_matching_fails(store):
    r = await store.enqueue_rollout(input=1, config=RolloutConfig(max_attempts=3, retry_condition=["timeout"]))
    await store.dequeue_rollout()
    await store.update_attempt(r.rollout_id, "latest", status="failed")
    assert (await store.get_rollout_by_id(r.rollout_id)).status == "failed"
    assert await store.dequeue_rollout() is None


async def test_requeued_rollout_goes_to_queue_tail(store):
    r = await store.enqueue_rollout(input="retry", config=RETRY_ON_FAILED)
    await store.dequeue_rollout()
    other = await store.enqueue_rollout(input="other")
    await store.update_attempt(r.rollout_id, "latest", status="failed")
    order = [(await store.dequeue_rollout()).rollout_id for _ in range(2)]
    assert order == [other.rollout_id, r.rollout_id]


# -- worker sync ------------------------------------------------------------------------------------------


async def test_worker_follows_attempt_status(store):
    expected = {"succeeded": "idle", "failed": "idle", "timeout": "unknown", "unresponsive": "unknown",
                "running": "busy"}
    for status, worker_status in expected.items():
        wid = f"w-{status}"
        await store.enqueue_rollout(input=1)
        d = await store.dequeue_rollout(worker_id=wid)
        await store.update_worker(wid, {"gpu": 1})
        await store.update_attempt(d.rollout_id, "latest", status=status)
        w = await store.get_worker_by_id(wid)
        assert w.status == worker_status, status
        assert w.heartbeat_stats == {"gpu": 1} and w.last_heartbeat_time is not None  # preserved
        if worker_status == "busy":
            assert (w.current_rollout_id, w.current_attempt_id) == (d.rollout_id, d.attempt.attempt_id)
        else:
            assert w.current_rollout_id is None and w.current_attempt_id is None and w.last_idle_time is not None


async def test_update_attempt_with_worker_id_syncs_that_worker(store):
    ar = await store.start_rollout(input=1)
    att = await store.update_attempt(ar.rollout_id, "latest", worker_id="w9")
    assert att.worker_id == "w9"
    w = await store.get_worker_by_id("w9")
    assert w.status == "busy" and w.current_attempt_id == ar.attempt.attempt_id


async def test_update_attempt_syncs_no_worker_without_worker_or_status(store):
    ar = await store.start_rollout(input=1)
    await store.update_attempt(ar.rollout_id, "latest", status="succeeded")
    await store.update_attempt(ar.rollout_id, "latest", worker_id="")
    assert (await store.query_workers()).total == 0
    # metadata alone does not sync the worker
    await store.enqueue_rollout(input=1)
    d = await store.dequeue_rollout(worker_id="w1")
    await store.update_attempt(d.rollout_id, "latest", status="succeeded")
    idle_since = (await store.get_worker_by_id("w1")).last_idle_time
    await store.update_attempt(d.rollout_id, "latest", metadata={"x": 1})
    w = await store.get_worker_by_id("w1")
    assert w.status == "idle" and w.last_idle_time == idle_since


# -- query_attempts / get_latest_attempt ----------------------------------------------------------------


async def test_query_attempts_sort_and_paginate(store):
    ar = await store.start_rollout(input=1)
    for _ in range(3):
        await store.start_attempt(ar.rollout_id)
    result = await store.query_attempts(ar.rollout_id)
    assert isinstance(result, PaginatedResult) and result.total == 4 and result.limit == -1
    assert [a.sequence_id for a in result] == [1, 2, 3, 4]
    desc = await store.query_attempts(ar.rollout_id, sort_order="desc", limit=2, offset=1)
    assert [a.sequence_id for a in desc] == [3, 2]
    assert (desc.total, desc.limit, desc.offset) == (4, 2, 1)
    by_time = await store.query_attempts(ar.rollout_id, sort_by="start_time", sort_order="desc")
    assert [a.sequence_id for a in by_time] == [4, 3, 2, 1]


async def test_get_latest_attempt_and_unknown_rollout_reads(store):
    assert await store.get_latest_attempt("ro-unknown") is None
    ar = await store.start_rollout(input=1)
    assert (await store.get_latest_attempt(ar.rollout_id)).attempt_id == ar.attempt.attempt_id
    second = await store.start_attempt(ar.rollout_id)
    latest = await store.get_latest_attempt(ar.rollout_id)
    assert latest.attempt_id == second.attempt.attempt_id and latest.sequence_id == 2
    result = await store.query_attempts("ro-unknown")
    assert isinstance(result, PaginatedResult) and list(result) == [] and result.total == 0

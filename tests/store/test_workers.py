"""Workers: heartbeat upserts, reads and queries (§1.2, §1.3), plus statistics and capabilities (§1.1)."""

from __future__ import annotations

import pytest

from agl_events.types import PaginatedResult, Worker
from tests.store import llm, make_span


async def test_update_worker_creates_unknown_worker(store, clock):
    clock.advance(1.0)  # decisions take the store clock
    before = clock()
    w = await store.update_worker("w1", {"cpu": 0.1, "mem": [1, 2]})
    assert isinstance(w, Worker) and w.worker_id == "w1" and w.status == "unknown"
    assert w.heartbeat_stats == {"cpu": 0.1, "mem": [1, 2]} and w.last_heartbeat_time >= before
    assert w.last_dequeue_time is None and w.current_rollout_id is None
    assert (await store.get_worker_by_id("w1")).model_dump() == w.model_dump()


async def test_update_worker_replaces_stats_and_unset_keeps_them(store):
    bare = await store.update_worker("w0")
    assert bare.status == "unknown" and bare.heartbeat_stats is None and bare.last_heartbeat_time is not None
    first = await store.update_worker("w1", {"a": 1, "b": 2})
    second = await store.update_worker("w1", {"c": 3})
    assert second.heartbeat_stats == {"c": 3}  # replaced, not merged
    assert second.last_heartbeat_time >= first.last_heartbeat_time
    third = await store.update_worker("w1")
    assert third.heartbeat_stats == {"c": 3} and third.last_heartbeat_time >= second.last_heartbeat_time


async def test_update_worker_none_stats_raises_type_error(store):
    with pytest.raises(TypeError):
        await store.update_worker("w1", None)
    assert await store.get_worker_by_id("w1") is None  # nothing was written; unknown id reads None


async def test_update_worker_preserves_other_fields(store):
    await store.enqueue_rollout(input=1)
    d = await store.dequeue_rollout(worker_id="w1")
    w = await store.update_worker("w1", {"x": 1})
    assert w.status == "busy" and w.current_rollout_id == d.rollout_id
    assert w.current_attempt_id == d.attempt.attempt_id and w.last_dequeue_time is not None


async def _three_workers(store):
    await store.update_worker("gpu-a", {})  # unknown
    await store.dequeue_rollout(worker_id="gpu-b")  # idle (empty queue)
    await store.enqueue_rollout(input=1)
    await store.dequeue_rollout(worker_id="cpu-c")  # busy


async def test_query_workers_filters(store):
    await _three_workers(store)
    everything = await store.query_workers()
    assert isinstance(everything, PaginatedResult) and everything.total == 3
    assert {w.worker_id for w in everything} == {"gpu-a", "gpu-b", "cpu-c"}
    by_status = await store.query_workers(status_in=["idle", "busy"], sort_by="worker_id")
    assert [w.worker_id for w in by_status] == ["cpu-c", "gpu-b"]
    assert (await store.query_workers(status_in=[])).total == 0
    assert [w.worker_id for w in await store.query_workers(worker_id_contains="gpu", sort_by="worker_id")] == [
        "gpu-a", "gpu-b"]
    both = await store.query_workers(status_in=["busy"], worker_id_contains="gpu")
    assert both.total == 0
    either = await store.query_workers(status_in=["busy"], worker_id_contains="gpu", filter_logic="or",
                                       sort_by="worker_id")
    assert [w.worker_id for w in either] == ["cpu-c", "gpu-a", "gpu-b"]


async def test_query_workers_sort_and_pages(store):
    await _three_workers(store)
    desc = await store.query_workers(sort_by="worker_id", sort_order="desc")
    assert [w.worker_id for w in desc] == ["gpu-b", "gpu-a", "cpu-c"]
    page = await store.query_workers(sort_by="worker_id", limit=1, offset=1)
    assert [w.worker_id for w in page] == ["gpu-a"] and (page.total, page.limit, page.offset) == (3, 1, 1)
    assert list(await store.query_workers(offset=5)) == []
    # None times sort last ascending: only gpu-a has never dequeued
    by_dequeue = await store.query_workers(sort_by="last_dequeue_time")
    assert by_dequeue[-1].worker_id == "gpu-a"
    with pytest.raises(ValueError):
        await store.query_workers(sort_by="bogus")


async def test_query_workers_without_sort_by_lists_them_in_first_seen_order(store):
    await store.update_worker("w-c")  # first seen: a heartbeat
    await store.dequeue_rollout(worker_id="w-a")  # first seen: an empty dequeue (idle)
    await store.update_worker("w-b", {"x": 1})
    await store.update_worker("w-c", {"y": 2})  # seen again: keeps its place
    assert [w.worker_id for w in await store.query_workers()] == ["w-c", "w-a", "w-b"]  # as upstream: insertion
    page = await store.query_workers(limit=1, offset=1)
    assert [w.worker_id for w in page] == ["w-a"] and (page.total, page.limit, page.offset) == (3, 1, 1)
    tied = await store.query_workers(sort_by="status")  # ties keep first-seen order (a stable sort)
    assert [w.worker_id for w in tied] == ["w-a", "w-c", "w-b"]


async def test_query_workers_filters_one_worker_and_reports_the_paging_it_was_given(store):
    await _three_workers(store)
    one = await store.query_workers(worker_id_contains="cpu")
    assert [w.worker_id for w in one] == ["cpu-c"] and (one.total, one.limit, one.offset) == (1, -1, 0)
    assert [w.worker_id for w in await store.query_workers(status_in=["idle"])] == ["gpu-b"]


# -- statistics -------------------------------------------------------------------------------------------


async def test_statistics_name_and_totals(store):
    assert store.capabilities["async_safe"] is True
    empty = await store.statistics()
    assert empty["name"] == type(store).__name__
    assert {k: empty[k] for k in ("total_rollouts", "total_attempts", "total_spans", "total_resources",
                                  "total_workers")} == dict.fromkeys(
        ("total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers"), 0)
    ar = await store.start_rollout(input=1, worker_id="w1")
    await store.start_attempt(ar.rollout_id)
    await store.enqueue_rollout(input=2)
    await store.add_span(make_span(ar.rollout_id, ar.attempt.attempt_id, 1))
    dup = await store.add_span(make_span(ar.rollout_id, ar.attempt.attempt_id, 2, span_id="e" * 16))
    await store.add_span(dup.model_copy())  # a duplicate is not counted
    res = await store.add_resources({"main": llm()})
    await store.update_resources(res.resources_id, {"main": llm("b")})  # an update is not a new snapshot
    await store.update_worker("w2", {})
    stats = await store.statistics()
    assert stats["name"] == type(store).__name__
    assert stats["total_rollouts"] == 2 and stats["total_attempts"] == 2 and stats["total_spans"] == 2
    assert stats["total_resources"] == 1 and stats["total_workers"] == 2
    assert stats["uptime"] >= 0

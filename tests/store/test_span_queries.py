"""query_spans: attempt scoping (None, "latest", id), exact and contains filters, and/or, sort, pages (§1.9)."""

from __future__ import annotations

import pytest

from agl_events.types import PaginatedResult
from tests.store import make_span

T1, T2 = "1" * 32, "2" * 32


@pytest.fixture
async def spans(store):
    """Rollout with two attempts: attempt 1 has spans seq 3,1 (inserted out of order), attempt 2 has 2,4."""
    ar = await store.start_rollout(input=1)
    second = await store.start_attempt(ar.rollout_id)
    a1, a2 = ar.attempt.attempt_id, second.attempt.attempt_id
    rid = ar.rollout_id
    await store.add_span(make_span(rid, a1, 3, span_id="a100000000000003", trace_id=T1, name="llm.call",
                                   parent_id="a100000000000001"))
    await store.add_span(make_span(rid, a1, 1, span_id="a100000000000001", trace_id=T1, name="agent.root"))
    await store.add_span(make_span(rid, a2, 2, span_id="a200000000000002", trace_id=T2, name="llm.retry",
                                   parent_id="a200000000000004"))
    await store.add_span(make_span(rid, a2, 4, span_id="a200000000000004", trace_id=T2, name="reward"))
    # a span of another rollout, which must never leak in
    other = await store.start_rollout(input=2)
    await store.add_span(make_span(other.rollout_id, other.attempt.attempt_id, 1, trace_id=T1, name="llm.call"))
    return store, rid, a1, a2


async def test_all_attempts_ordered_by_sequence_id(spans):
    store, rid, _, _ = spans
    result = await store.query_spans(rid)
    assert isinstance(result, PaginatedResult)
    assert [s.sequence_id for s in result] == [1, 2, 3, 4]
    assert (result.total, result.limit, result.offset) == (4, -1, 0)
    assert [s.sequence_id for s in await store.query_spans(rid, None)] == [1, 2, 3, 4]


async def test_attempt_scoping(spans):
    store, rid, a1, a2 = spans
    assert [s.sequence_id for s in await store.query_spans(rid, a1)] == [1, 3]
    assert [s.sequence_id for s in await store.query_spans(rid, a2)] == [2, 4]
    latest = await store.query_spans(rid, "latest")
    assert [s.attempt_id for s in latest] == [a2, a2]


async def test_unknown_rollout_attempt_and_latest_without_attempts_are_empty(spans):
    store, rid, _, _ = spans
    for result in [await store.query_spans("ro-unknown"), await store.query_spans(rid, "at-unknown"),
                   await store.query_spans("ro-unknown", "latest")]:
        assert isinstance(result, PaginatedResult) and list(result) == [] and result.total == 0
    queued = await store.enqueue_rollout(input=1)
    assert (await store.query_spans(queued.rollout_id, "latest")).total == 0


async def test_exact_and_contains_filters(spans):
    store, rid, _, _ = spans
    assert [s.sequence_id for s in await store.query_spans(rid, trace_id=T1)] == [1, 3]
    assert [s.sequence_id for s in await store.query_spans(rid, span_id="a200000000000004")] == [4]
    assert [s.sequence_id for s in await store.query_spans(rid, parent_id="a100000000000001")] == [3]
    assert [s.sequence_id for s in await store.query_spans(rid, name="reward")] == [4]
    assert (await store.query_spans(rid, name="llm")).total == 0  # exact, not substring
    assert [s.sequence_id for s in await store.query_spans(rid, name_contains="llm")] == [2, 3]
    assert [s.sequence_id for s in await store.query_spans(rid, span_id_contains="a2")] == [2, 4]
    assert [s.sequence_id for s in await store.query_spans(rid, trace_id_contains="22")] == [2, 4]
    assert [s.sequence_id for s in await store.query_spans(rid, parent_id_contains="0004")] == [2]


async def test_and_or_logic_with_mandatory_rollout_and_attempt(spans):
    store, rid, a1, _ = spans
    got = await store.query_spans(rid, trace_id=T1, name_contains="llm")
    assert [s.sequence_id for s in got] == [3]
    assert (await store.query_spans(rid, trace_id=T1, name="reward")).total == 0
    got = await store.query_spans(rid, name="reward", span_id_contains="a1", filter_logic="or")
    assert [s.sequence_id for s in got] == [1, 3, 4]
    scoped = await store.query_spans(rid, a1, name="reward", name_contains="root", filter_logic="or")
    assert [s.sequence_id for s in scoped] == [1]
    # no optional filter with "or" still means everything of the rollout
    assert (await store.query_spans(rid, filter_logic="or")).total == 4


async def test_sort_and_paginate(spans):
    store, rid, _, _ = spans
    by_name = await store.query_spans(rid, sort_by="name")
    assert [s.name for s in by_name] == ["agent.root", "llm.call", "llm.retry", "reward"]
    desc = await store.query_spans(rid, sort_order="desc")
    assert [s.sequence_id for s in desc] == [4, 3, 2, 1]
    page = await store.query_spans(rid, limit=2, offset=1)
    assert [s.sequence_id for s in page] == [2, 3] and (page.total, page.limit, page.offset) == (4, 2, 1)
    assert list(await store.query_spans(rid, limit=0)) == []
    past = await store.query_spans(rid, offset=10)
    assert list(past) == [] and past.total == 4
    filtered_page = await store.query_spans(rid, name_contains="llm", limit=1, offset=1)
    assert [s.sequence_id for s in filtered_page] == [3] and filtered_page.total == 2


async def test_unknown_sort_field_raises(spans):
    store, rid, _, _ = spans
    with pytest.raises(ValueError):
        await store.query_spans(rid, sort_by="no_such_field")

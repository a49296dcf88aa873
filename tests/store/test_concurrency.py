"""Every coroutine appears atomic under concurrent callers (§1.1, §7.2)."""

from __future__ import annotations

import asyncio

from agl_events.types import RolloutConfig
from tests.store import make_span


async def test_concurrent_enqueues_are_all_distinct(store):
    created = await asyncio.gather(*(store.enqueue_rollout(input={"i": i}) for i in range(50)))
    ids = [r.rollout_id for r in created]
    assert len(set(ids)) == 50
    result = await store.query_rollouts(status_in=["queuing"])
    assert result.total == 50 and {r.rollout_id for r in result} == set(ids)
    assert sorted(r.input["i"] for r in result) == list(range(50))


async def test_concurrent_dequeues_claim_each_rollout_once(store):
    queued = [(await store.enqueue_rollout(input=i)).rollout_id for i in range(20)]
    got = await asyncio.gather(*(store.dequeue_rollout(worker_id=f"w{i}") for i in range(30)))
    claimed = [d for d in got if d is not None]
    assert len(claimed) == 20
    assert sorted(d.rollout_id for d in claimed) == sorted(queued)
    assert all(d.attempt.sequence_id == 1 for d in claimed)
    assert len({d.attempt.attempt_id for d in claimed}) == 20
    for rid in queued:
        assert (await store.query_attempts(rid)).total == 1
    workers = await store.query_workers()
    assert sorted(w.status for w in workers) == ["busy"] * 20 + ["idle"] * 10


async def test_concurrent_dequeue_many_claims_each_rollout_once(store):
    queued = [(await store.enqueue_rollout(input=i)).rollout_id for i in range(20)]
    batches = await asyncio.gather(*(store.dequeue_many_rollouts(limit=3) for _ in range(10)))
    claimed = [d.rollout_id for batch in batches for d in batch]
    assert sorted(claimed) == sorted(queued)


async def test_concurrent_sequence_ids_are_gap_free(store):
    ar = await store.start_rollout(input=1)
    got = await asyncio.gather(*(store.get_next_span_sequence_id(ar.rollout_id, ar.attempt.attempt_id)
                                 for _ in range(30)))
    assert sorted(got) == list(range(1, 31))


async def test_concurrent_bulk_sequence_ids_are_gap_free(store):
    ar = await store.start_rollout(input=1)
    pair = (ar.rollout_id, ar.attempt.attempt_id)
    got = await asyncio.gather(*(store.get_many_span_sequence_ids([pair] * 3) for _ in range(10)))
    assert sorted(i for batch in got for i in batch) == list(range(1, 31))
    assert all(list(batch) == sorted(batch) for batch in got)


async def test_concurrent_duplicate_spans_insert_once(store):
    ar = await store.start_rollout(input=1)
    spans = [make_span(ar.rollout_id, ar.attempt.attempt_id, i, span_id="f" * 16) for i in range(1, 11)]
    results = await asyncio.gather(*(store.add_span(s) for s in spans))
    assert sum(r is not None for r in results) == 1
    assert (await store.query_spans(ar.rollout_id)).total == 1


async def test_concurrent_retries_create_distinct_attempt_numbers(store):
    ar = await store.start_rollout(input=1, config=RolloutConfig(max_attempts=1))
    got = await asyncio.gather(*(store.start_attempt(ar.rollout_id) for _ in range(10)))
    assert sorted(x.attempt.sequence_id for x in got) == list(range(2, 12))
    latest = await store.get_latest_attempt(ar.rollout_id)
    assert latest.sequence_id == 11


async def test_concurrent_updates_and_reads_stay_consistent(store):
    r = await store.enqueue_rollout(input=1, config=RolloutConfig(max_attempts=100, retry_condition=["failed"]))

    async def cycle():
        d = await store.dequeue_rollout()
        if d is not None:
            await store.update_attempt(d.rollout_id, d.attempt.attempt_id, status="failed")

    for _ in range(5):
        await asyncio.gather(*(cycle() for _ in range(4)))
    attempts = await store.query_attempts(r.rollout_id)
    assert [a.sequence_id for a in attempts] == list(range(1, attempts.total + 1))
    assert 5 <= attempts.total <= 20 and all(a.status == "failed" for a in attempts)
    assert (await store.get_rollout_by_id(r.rollout_id)).status == "requeuing"

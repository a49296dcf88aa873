"""Spans: insert and duplicates, heartbeats, per-rollout sequence ids (§1.2, §1.5, §1.6)."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from agl_events.types import RolloutConfig
from tests.store import make_span

RETRY_UNRESPONSIVE = RolloutConfig(max_attempts=2, retry_condition=["unresponsive"])


async def test_add_span_returns_the_argument_itself(store):
    ar = await store.start_rollout(input=1)
    span = make_span(ar.rollout_id, ar.attempt.attempt_id, 1)
    assert await store.add_span(span) is span
    stored = list(await store.query_spans(ar.rollout_id))
    assert len(stored) == 1 and stored[0].model_dump() == span.model_dump()


async def test_span_round_trip_keeps_attributes_and_extra_fields(store):
    ar = await store.start_rollout(input=1)
    span = make_span(ar.rollout_id, ar.attempt.attempt_id, 1, parent_id="00000000000000ab",
                     custom_field={"nested": [1, 2]})
    span.attributes.update({"b": True, "i": 3, "f": 0.25, "l": ["x", "y"]})
    await store.add_span(span)
    (got,) = list(await store.query_spans(ar.rollout_id))
    assert got.attributes == {"k": "v", "b": True, "i": 3, "f": 0.25, "l": ["x", "y"]}
    assert got.parent_id == "00000000000000ab"
    assert got.model_dump()["custom_field"] == {"nested": [1, 2]}


async def test_duplicate_span_returns_none_and_logs_error(store, caplog):
    ar = await store.start_rollout(input=1)
    span = make_span(ar.rollout_id, ar.attempt.attempt_id, 1, span_id="aaaaaaaaaaaaaaaa")
    assert await store.add_span(span) is span
    dup = make_span(ar.rollout_id, ar.attempt.attempt_id, 2, span_id="aaaaaaaaaaaaaaaa", name="again")
    with caplog.at_level(logging.ERROR):
        assert await store.add_span(dup) is None
    records = [r for r in caplog.records if "Duplicated span added" in r.getMessage()]
    assert records and records[0].levelno == logging.ERROR
    assert ar.rollout_id in records[0].getMessage() and "aaaaaaaaaaaaaaaa" in records[0].getMessage()
    stored = list(await store.query_spans(ar.rollout_id))
    assert len(stored) == 1 and stored[0].name == "span"
    # a duplicate is not a heartbeat
    ar = await store.start_rollout(input=1)
    span = make_span(ar.rollout_id, ar.attempt.attempt_id, 1)
    await store.add_span(span)
    hb = (await store.get_latest_attempt(ar.rollout_id)).last_heartbeat_time
    assert await store.add_span(span) is None
    assert (await store.get_latest_attempt(ar.rollout_id)).last_heartbeat_time == hb


async def test_same_span_id_in_another_attempt_is_not_a_duplicate(store):
    ar = await store.start_rollout(input=1)
    second = await store.start_attempt(ar.rollout_id)
    s1 = make_span(ar.rollout_id, ar.attempt.attempt_id, 1, span_id="bbbbbbbbbbbbbbbb")
    s2 = make_span(ar.rollout_id, second.attempt.attempt_id, 2, span_id="bbbbbbbbbbbbbbbb")
    assert await store.add_span(s1) is s1 and await store.add_span(s2) is s2
    assert (await store.query_spans(ar.rollout_id)).total == 2


async def test_add_many_spans_returns_only_inserted(store, caplog):
    ar = await store.start_rollout(input=1)
    aid = ar.attempt.attempt_id
    existing = make_span(ar.rollout_id, aid, 1, span_id="cccccccccccccccc")
    await store.add_span(existing)
    fresh1 = make_span(ar.rollout_id, aid, 2)
    dup = make_span(ar.rollout_id, aid, 3, span_id="cccccccccccccccc")
    fresh2 = make_span(ar.rollout_id, aid, 4)
    with caplog.at_level(logging.ERROR):
        inserted = await store.add_many_spans([fresh1, dup, fresh2])
    assert len(inserted) == 2 and inserted[0] is fresh1 and inserted[1] is fresh2
    assert any("Duplicated span added" in r.getMessage() for r in caplog.records)
    assert [s.sequence_id for s in await store.query_spans(ar.rollout_id)] == [1, 2, 4]


async def test_add_many_spans_duplicate_within_batch(store):
    ar = await store.start_rollout(input=1)
    a = make_span(ar.rollout_id, ar.attempt.attempt_id, 1, span_id="dddddddddddddddd")
    b = make_span(ar.rollout_id, ar.attempt.attempt_id, 2, span_id="dddddddddddddddd")
    inserted = await store.add_many_spans([a, b])
    assert len(inserted) == 1 and inserted[0] is a
    assert list(await store.add_many_spans([])) == []


async def test_add_many_spans_over_several_rollouts_and_attempts(store):
    r1 = await store.start_rollout(input=1)
    r2 = await store.start_rollout(input=2)
    r1b = await store.start_attempt(r1.rollout_id)
    spans = [make_span(r1.rollout_id, r1.attempt.attempt_id, 1), make_span(r2.rollout_id, r2.attempt.attempt_id, 1),
             make_span(r1.rollout_id, r1b.attempt.attempt_id, 2), make_span(r2.rollout_id, r2.attempt.attempt_id, 7)]
    inserted = await store.add_many_spans(spans)
    assert len(inserted) == 4 and all(any(i is s for s in spans) for i in inserted)
    assert (await store.query_spans(r1.rollout_id)).total == 2
    assert (await store.query_spans(r2.rollout_id)).total == 2
    assert await store.get_next_span_sequence_id(r2.rollout_id, r2.attempt.attempt_id) == 8
    assert await store.get_next_span_sequence_id(r1.rollout_id, r1.attempt.attempt_id) == 3


async def test_span_for_unknown_rollout_or_attempt_raises(store):
    ar = await store.start_rollout(input=1)
    with pytest.raises(ValueError, match="Rollout ro-nope not found"):
        await store.add_span(make_span("ro-nope", ar.attempt.attempt_id, 1))
    with pytest.raises(ValueError, match=f"Attempt at-nope0000 not found for rollout {ar.rollout_id}"):
        await store.add_span(make_span(ar.rollout_id, "at-nope0000", 1))
    with pytest.raises(ValueError, match="Rollout ro-nope not found"):
        await store.add_many_spans([make_span("ro-nope", "at-x", 1)])
    assert (await store.query_spans(ar.rollout_id)).total == 0


# -- spans as heartbeats --------------------------------------------------------------------------------


async def test_first_span_turns_attempt_and_rollout_running(store, clock):
    await store.enqueue_rollout(input=1)
    d = await store.dequeue_rollout()
    clock.advance(1.0)  # decisions take the store clock
    before = clock()
    await store.add_span(make_span(d.rollout_id, d.attempt.attempt_id, 1))
    r = await store.get_rollout_by_id(d.rollout_id)
    assert r.status == "running" and r.attempt.status == "running"
    assert r.attempt.last_heartbeat_time is not None and r.attempt.last_heartbeat_time >= before
    assert r.attempt.last_heartbeat_time != 1.0 and r.attempt.last_heartbeat_time != 2.0  # store clock
    # add_many_spans is a heartbeat too
    ar = await store.start_rollout(input=1)
    await store.add_many_spans([make_span(ar.rollout_id, ar.attempt.attempt_id, 1)])
    r = await store.get_rollout_by_id(ar.rollout_id)
    assert r.status == "running" and r.attempt.status == "running"
    assert r.attempt.last_heartbeat_time is not None


async def test_span_keeps_finished_attempt_status_but_records_heartbeat(store):
    for status in ("timeout", "failed", "succeeded"):
        ar = await store.start_rollout(input=1)
        await store.update_attempt(ar.rollout_id, "latest", status=status)
        rollout_status = (await store.get_rollout_by_id(ar.rollout_id)).status
        await store.add_span(make_span(ar.rollout_id, ar.attempt.attempt_id, 1))
        r = await store.get_rollout_by_id(ar.rollout_id)
        assert r.attempt.status == status and r.attempt.last_heartbeat_time is not None
        assert r.status == rollout_status


async def test_span_of_old_attempt_does_not_drive_rollout(store):
    ar = await store.start_rollout(input=1)
    await store.start_attempt(ar.rollout_id)
    await store.add_span(make_span(ar.rollout_id, ar.attempt.attempt_id, 1))
    r = await store.get_rollout_by_id(ar.rollout_id)
    assert r.status == "preparing" and r.attempt.status == "preparing"
    old = (await store.query_attempts(ar.rollout_id))[0]
    assert old.status == "running"


async def test_span_on_requeuing_latest_attempt_revives_rollout(store):
    ar = await store.start_rollout(input=1, config=RETRY_UNRESPONSIVE)
    await store.update_attempt(ar.rollout_id, "latest", status="unresponsive")
    assert (await store.get_rollout_by_id(ar.rollout_id)).status == "requeuing"
    await store.add_span(make_span(ar.rollout_id, ar.attempt.attempt_id, 1))
    r = await store.get_rollout_by_id(ar.rollout_id)
    assert r.status == "running" and r.attempt.status == "running"
    assert await store.dequeue_rollout() is None


# -- sequence ids ---------------------------------------------------------------------------------------


async def test_sequence_ids_are_per_rollout_and_shared_by_attempts(store):
    ar = await store.start_rollout(input=1)
    rid, aid = ar.rollout_id, ar.attempt.attempt_id
    assert await store.get_next_span_sequence_id(rid, aid) == 1
    assert await store.get_next_span_sequence_id(rid, aid) == 2  # stands in for add_otel_span's auto id
    second = await store.start_attempt(rid)
    assert await store.get_next_span_sequence_id(rid, second.attempt.attempt_id) == 3
    assert await store.get_next_span_sequence_id(rid, aid) == 4
    assert await store.get_next_span_sequence_id(rid, "at-nonexist") == 5


async def test_get_many_span_sequence_ids_example(store):
    r1 = await store.start_rollout(input=1)
    r2 = await store.start_rollout(input=2)
    a1, a2 = r1.attempt.attempt_id, r2.attempt.attempt_id
    a1b = (await store.start_attempt(r1.rollout_id)).attempt.attempt_id
    pairs = [(r1.rollout_id, a1), (r2.rollout_id, a2), (r1.rollout_id, a1b), (r1.rollout_id, a1)]
    assert list(await store.get_many_span_sequence_ids(pairs)) == [1, 1, 2, 3]
    assert await store.get_next_span_sequence_id(r1.rollout_id, a1) == 4
    assert await store.get_next_span_sequence_id(r2.rollout_id, a2) == 2
    # not validated: an unknown rollout gets its own counter
    assert await store.get_next_span_sequence_id("ro-nothing", "at-nothing") == 1
    assert list(await store.get_many_span_sequence_ids([])) == []


async def test_explicit_sequence_id_bumps_counter(store):
    ar = await store.start_rollout(input=1)
    rid, aid = ar.rollout_id, ar.attempt.attempt_id
    await store.add_span(make_span(rid, aid, 100))
    assert await store.get_next_span_sequence_id(rid, aid) == 101
    await store.add_span(make_span(rid, aid, 5))  # lower: chmax leaves the counter alone
    assert await store.get_next_span_sequence_id(rid, aid) == 102
    await store.add_many_spans([make_span(rid, aid, 150), make_span(rid, aid, 120)])
    assert await store.get_next_span_sequence_id(rid, aid) == 151


async def test_sequence_counter_bumped_even_when_span_is_rejected(store):
    ar = await store.start_rollout(input=1)
    with pytest.raises(ValueError):
        await store.add_span(make_span(ar.rollout_id, "at-unknown0", 50))
    assert await store.get_next_span_sequence_id(ar.rollout_id, ar.attempt.attempt_id) == 51


async def test_a_span_over_the_event_size_limit_fails_alone_and_the_store_keeps_serving(store):
    ar = await store.start_rollout(input=1)
    rid, aid = ar.rollout_id, ar.attempt.attempt_id
    huge = make_span(rid, aid, 1)
    huge.attributes["blob"] = "x" * (9 * 1024 * 1024)  # the log takes records of up to 8 MiB
    async with asyncio.timeout(60):  # an append refused at once must not wedge the committer
        refused, kept = await asyncio.gather(store.add_span(huge), store.add_span(make_span(rid, aid, 2)),
                                             return_exceptions=True)  # decided in one commit batch
        assert isinstance(refused, ValueError), refused
        assert re.search(r"is \d+ bytes encoded; the limit is \d+ bytes", str(refused)), str(refused)
        assert kept is not None and not isinstance(kept, BaseException)  # the span beside it is not refused
        assert await store.add_span(make_span(rid, aid, 3)) is not None
        assert (await store.enqueue_rollout(input=2)).status == "queuing"
        assert [s.sequence_id for s in await store.query_spans(rid)] == [2, 3]

"""query_rollouts: filters with and/or, item types, sorting with None rules, pagination, aliases (§1.2, §1.9)."""

from __future__ import annotations

import warnings

import pytest

from agl_events.types import AttemptedRollout, PaginatedResult, Rollout


@pytest.fixture
async def rollouts(store):
    """q0 queuing, p1 preparing (started, worker), s2 succeeded, c3 cancelled (queued, never attempted)."""
    q0 = await store.enqueue_rollout(input=0, mode="train")
    p1 = await store.start_rollout(input=1, mode="val", resources_id="rs-b")
    s2 = await store.start_rollout(input=2, resources_id="rs-a")
    await store.update_attempt(s2.rollout_id, "latest", status="succeeded")
    c3 = await store.enqueue_rollout(input=3, mode="test")
    await store.update_rollout(c3.rollout_id, status="cancelled")
    return store, [q0.rollout_id, p1.rollout_id, s2.rollout_id, c3.rollout_id]


def _ids(result):
    return [r.rollout_id for r in result]


async def test_no_filter_returns_all_in_creation_order(rollouts):
    store, ids = rollouts
    result = await store.query_rollouts()
    assert isinstance(result, PaginatedResult)
    assert _ids(result) == ids and (result.total, result.limit, result.offset) == (4, -1, 0)


async def test_items_are_attempted_only_when_attempts_exist(rollouts):
    store, ids = rollouts
    by_id = {r.rollout_id: r for r in await store.query_rollouts()}
    assert type(by_id[ids[0]]) is Rollout and type(by_id[ids[3]]) is Rollout
    assert isinstance(by_id[ids[1]], AttemptedRollout) and isinstance(by_id[ids[2]], AttemptedRollout)
    assert by_id[ids[2]].attempt.status == "succeeded"


async def test_latest_attempt_attached(store):
    ar = await store.start_rollout(input=1)
    second = await store.start_attempt(ar.rollout_id)
    (item,) = list(await store.query_rollouts())
    assert item.attempt.attempt_id == second.attempt.attempt_id and item.attempt.sequence_id == 2


async def test_status_in(rollouts):
    store, ids = rollouts
    assert _ids(await store.query_rollouts(status_in=["queuing"])) == [ids[0]]
    assert _ids(await store.query_rollouts(status_in=["succeeded", "cancelled"])) == [ids[2], ids[3]]
    empty = await store.query_rollouts(status_in=[])
    assert list(empty) == [] and empty.total == 0


async def test_rollout_id_in_and_contains(rollouts):
    store, ids = rollouts
    assert _ids(await store.query_rollouts(rollout_id_in=[ids[3], ids[1], "ro-unknown"])) == [ids[1], ids[3]]
    assert (await store.query_rollouts(rollout_id_in=[])).total == 0
    assert _ids(await store.query_rollouts(rollout_id_contains=ids[2][3:10])) == [ids[2]]
    assert (await store.query_rollouts(rollout_id_contains="ro-")).total == 4
    assert (await store.query_rollouts(rollout_id_contains="zzz")).total == 0


async def test_and_logic(rollouts):
    store, ids = rollouts
    got = await store.query_rollouts(status_in=["queuing", "preparing"], rollout_id_in=[ids[1], ids[2]])
    assert _ids(got) == [ids[1]]
    assert (await store.query_rollouts(status_in=["queuing"], rollout_id_contains=ids[2][3:])).total == 0


async def test_or_logic(rollouts):
    store, ids = rollouts
    got = await store.query_rollouts(status_in=["queuing"], rollout_id_in=[ids[2]], filter_logic="or")
    assert _ids(got) == [ids[0], ids[2]]
    got = await store.query_rollouts(status_in=["cancelled"], rollout_id_contains=ids[1][3:], filter_logic="or")
    assert _ids(got) == [ids[1], ids[3]]
    assert (await store.query_rollouts(filter_logic="or")).total == 4


async def test_sort_by_fields(rollouts):
    store, ids = rollouts
    assert _ids(await store.query_rollouts(sort_by="start_time", sort_order="desc")) == ids[::-1]
    assert _ids(await store.query_rollouts(sort_by="rollout_id")) == sorted(ids)
    assert _ids(await store.query_rollouts(sort_by="rollout_id", sort_order="desc")) == sorted(ids, reverse=True)
    by_status = [r.status for r in await store.query_rollouts(sort_by="status")]
    assert by_status == sorted(by_status)


async def test_sort_none_rules(rollouts):
    store, ids = rollouts
    # *_time: None is +inf, so last ascending and first descending (q0, p1 have no end_time)
    asc = _ids(await store.query_rollouts(sort_by="end_time"))
    assert asc[:2] == [ids[2], ids[3]] and set(asc[2:]) == {ids[0], ids[1]}
    desc = _ids(await store.query_rollouts(sort_by="end_time", sort_order="desc"))
    assert set(desc[:2]) == {ids[0], ids[1]} and desc[2:] == [ids[3], ids[2]]
    # str/Literal: None is "" (s2 has mode None; q0/p1/c3 are train/val/test; q0 and c3 have resources_id None)
    assert _ids(await store.query_rollouts(sort_by="mode")) == [ids[2], ids[3], ids[0], ids[1]]
    by_res = _ids(await store.query_rollouts(sort_by="resources_id"))
    assert set(by_res[:2]) == {ids[0], ids[3]} and by_res[2:] == [ids[2], ids[1]]


async def test_unknown_sort_field_raises(rollouts):
    store, _ = rollouts
    with pytest.raises(ValueError):
        await store.query_rollouts(sort_by="not_a_field")


async def test_limits_offsets_and_total(rollouts):
    store, ids = rollouts
    page = await store.query_rollouts(limit=2, offset=1)
    assert _ids(page) == ids[1:3] and (page.total, page.limit, page.offset) == (4, 2, 1)
    none = await store.query_rollouts(limit=0)
    assert list(none) == [] and none.total == 4 and none.limit == 0
    past = await store.query_rollouts(offset=10)
    assert list(past) == [] and past.total == 4
    assert _ids(await store.query_rollouts(limit=-1, offset=3)) == ids[3:]
    filtered = await store.query_rollouts(status_in=["queuing", "cancelled"], limit=1, sort_order="desc",
                                          sort_by="start_time")
    assert _ids(filtered) == [ids[3]] and filtered.total == 2


async def test_paginated_result_behaves_as_sequence(rollouts):
    store, ids = rollouts
    result = await store.query_rollouts(limit=3)
    assert len(result) == 3 and result[0].rollout_id == ids[0] and [r.rollout_id for r in result[1:]] == ids[1:3]
    assert "PaginatedResult" in repr(result)


async def test_deprecated_aliases_warn(rollouts):
    store, ids = rollouts
    with pytest.warns(DeprecationWarning):
        got = await store.query_rollouts(status=["queuing"])
    assert _ids(got) == [ids[0]]
    with pytest.warns(DeprecationWarning):
        got = await store.query_rollouts(rollout_ids=[ids[1]])
    assert _ids(got) == [ids[1]]


async def test_new_names_win_over_aliases(rollouts):
    store, ids = rollouts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        got = await store.query_rollouts(status_in=["succeeded"], status=["queuing"],
                                         rollout_id_in=[ids[2]], rollout_ids=[ids[0]])
    assert _ids(got) == [ids[2]]


async def test_query_reflects_status_changes(rollouts):
    store, ids = rollouts
    await store.dequeue_rollout()
    assert _ids(await store.query_rollouts(status_in=["preparing"])) == [ids[0], ids[1]]
    assert (await store.query_rollouts(status_in=["queuing"])).total == 0

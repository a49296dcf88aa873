"""Creating rollouts (start, enqueue, enqueue many), their ids, reads by id, and update_rollout (§1.2, §1.10)."""

from __future__ import annotations

import pytest

from agl_events.types import AttemptedRollout, EnqueueRolloutRequest, Rollout, RolloutConfig
from tests.store import ATTEMPT_ID, ROLLOUT_ID, llm

# -- start_rollout -------------------------------------------------------------------------------------


async def test_start_rollout_creates_preparing_rollout_with_first_attempt(store, clock):
    clock.advance(1.0)  # decisions take the store clock
    before = clock()
    ar = await store.start_rollout(input={"q": 1}, mode="train", worker_id="w1")
    after = clock() + 1e-3  # the store keeps its decision times strictly increasing (microsecond steps)
    assert isinstance(ar, AttemptedRollout)
    assert ROLLOUT_ID.match(ar.rollout_id) and ATTEMPT_ID.match(ar.attempt.attempt_id)
    assert ar.status == "preparing" and ar.mode == "train" and ar.input == {"q": 1}
    assert ar.attempt.status == "preparing" and ar.attempt.sequence_id == 1
    assert ar.attempt.worker_id == "w1" and ar.attempt.rollout_id == ar.rollout_id
    assert before <= ar.start_time <= after and before <= ar.attempt.start_time <= after
    assert ar.end_time is None and ar.attempt.end_time is None
    assert ar.config == RolloutConfig() and ar.metadata == {}
    got = await store.get_rollout_by_id(ar.rollout_id)
    assert isinstance(got, AttemptedRollout) and got.attempt.attempt_id == ar.attempt.attempt_id


async def test_start_rollout_skips_queue_and_syncs_worker(store):
    await store.start_rollout(input=0)
    assert (await store.query_workers()).total == 0  # no worker_id, no worker
    ar = await store.start_rollout(input=1, worker_id="w1")
    assert await store.dequeue_rollout() is None  # started rollouts never go through the queue
    worker = await store.get_worker_by_id("w1")
    assert worker is not None and worker.status == "busy"
    assert worker.current_rollout_id == ar.rollout_id and worker.current_attempt_id == ar.attempt.attempt_id
    assert worker.last_busy_time is not None


async def test_start_rollout_resources_default_to_latest_and_unknown_id_is_not_validated(store):
    assert (await store.start_rollout(input=1)).resources_id is None
    res = await store.add_resources({"main": llm()})
    assert (await store.start_rollout(input=1)).resources_id == res.resources_id
    # reference behaviour: an unknown resources_id is stored as given
    assert (await store.start_rollout(input=1, resources_id="rs-nope")).resources_id == "rs-nope"


# -- enqueue ---------------------------------------------------------------------------------------------


async def test_enqueue_rollout_is_queuing_without_attempt(store):
    r = await store.enqueue_rollout(input={"task": "x"}, mode="val", metadata={"a": 1})
    assert type(r) is Rollout
    assert ROLLOUT_ID.match(r.rollout_id) and r.status == "queuing"
    assert r.mode == "val" and r.metadata == {"a": 1} and r.end_time is None
    got = await store.get_rollout_by_id(r.rollout_id)
    assert type(got) is Rollout and got.status == "queuing"
    assert (await store.query_attempts(r.rollout_id)).total == 0
    assert await store.get_latest_attempt(r.rollout_id) is None
    # defaults: metadata {}, RolloutConfig(), mode None
    r = await store.enqueue_rollout(input=None)
    assert r.metadata == {} and r.config == RolloutConfig() and r.mode is None
    assert (await store.get_rollout_by_id(r.rollout_id)).metadata == {}


async def test_enqueue_deep_copies_config_and_copies_metadata(store):
    config = RolloutConfig(max_attempts=3, retry_condition=["failed"])
    metadata = {"tag": "a"}
    r = await store.enqueue_rollout(input=1, config=config, metadata=metadata)
    assert r.config is not config and r.config == config
    config.retry_condition.append("timeout")
    config.max_attempts = 9
    metadata["tag"] = "changed"
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.config.retry_condition == ["failed"] and got.config.max_attempts == 3
    assert got.metadata == {"tag": "a"}


async def test_enqueue_resources_latest_resolved_and_unknown_stored_as_given(store):
    assert (await store.enqueue_rollout(input=1)).resources_id is None
    first = await store.add_resources({"main": llm("a")})
    assert (await store.enqueue_rollout(input=1)).resources_id == first.resources_id
    second = await store.add_resources({"main": llm("b")})
    assert (await store.enqueue_rollout(input=1)).resources_id == second.resources_id
    explicit = await store.enqueue_rollout(input=1, resources_id=first.resources_id)
    assert explicit.resources_id == first.resources_id
    assert (await store.enqueue_rollout(input=1, resources_id="rs-missing")).resources_id == "rs-missing"


async def test_enqueue_many_keeps_order_and_resolves_latest(store):
    res = await store.add_resources({"main": llm()})
    requests = [
        EnqueueRolloutRequest(input={"i": 0}),
        EnqueueRolloutRequest(input={"i": 1}, mode="test", resources_id="rs-explicit",
                              config=RolloutConfig(max_attempts=2), metadata={"m": 1}),
        EnqueueRolloutRequest(input={"i": 2}),
    ]
    rollouts = await store.enqueue_many_rollouts(requests)
    assert [r.input for r in rollouts] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert all(r.status == "queuing" and ROLLOUT_ID.match(r.rollout_id) for r in rollouts)
    assert len({r.rollout_id for r in rollouts}) == 3
    assert [r.resources_id for r in rollouts] == [res.resources_id, "rs-explicit", res.resources_id]
    assert rollouts[1].mode == "test" and rollouts[1].config.max_attempts == 2 and rollouts[1].metadata == {"m": 1}
    assert rollouts[0].metadata == {} and rollouts[0].config == RolloutConfig()
    dequeued = [await store.dequeue_rollout() for _ in range(3)]
    assert [d.rollout_id for d in dequeued] == [r.rollout_id for r in rollouts]


async def test_empty_batch_and_unknown_id(store):
    assert list(await store.enqueue_many_rollouts([])) == []
    assert await store.get_rollout_by_id("ro-000000000000") is None


# -- update_rollout ---------------------------------------------------------------------------------------


async def test_update_rollout_replaces_every_given_field(store):
    r = await store.enqueue_rollout(input={"a": 1}, mode="train", resources_id="rs-x", metadata={"k": 1})
    config = RolloutConfig(timeout_seconds=30.0, max_attempts=4, retry_condition=["timeout"])
    updated = await store.update_rollout(r.rollout_id, input={"b": 2}, mode="val", resources_id="rs-y",
                                         config=config, metadata={"k": 2})
    assert isinstance(updated, Rollout)
    assert updated.input == {"b": 2} and updated.mode == "val" and updated.resources_id == "rs-y"
    assert updated.config == config and updated.metadata == {"k": 2} and updated.status == "queuing"
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.model_dump() == updated.model_dump()
    # fields left UNSET are kept
    r = await store.enqueue_rollout(input={"a": 1}, mode="train", metadata={"k": 1})
    updated = await store.update_rollout(r.rollout_id, metadata={"k": 2})
    assert updated.input == {"a": 1} and updated.mode == "train" and updated.status == "queuing"
    assert updated.start_time == r.start_time and updated.rollout_id == r.rollout_id


async def test_update_rollout_accepts_explicit_none(store):
    r = await store.enqueue_rollout(input={"a": 1}, mode="train", resources_id="rs-x", metadata={"k": 1})
    updated = await store.update_rollout(r.rollout_id, input=None, mode=None, resources_id=None, metadata=None)
    assert updated.input is None and updated.mode is None and updated.resources_id is None
    assert updated.metadata is None
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.input is None and got.mode is None and got.resources_id is None and got.metadata is None


async def test_update_rollout_terminal_status_sets_end_time(store, clock):
    for status in ("failed", "succeeded", "cancelled"):
        r = await store.enqueue_rollout(input=1)
        clock.advance(1.0)  # decisions take the store clock
        before = clock()
        updated = await store.update_rollout(r.rollout_id, status=status)
        assert updated.status == status and updated.end_time is not None and updated.end_time >= before
        assert (await store.get_rollout_by_id(r.rollout_id)).end_time == updated.end_time


async def test_update_rollout_has_no_transition_validation(store):
    ar = await store.start_rollout(input=1)
    rid = ar.rollout_id
    for status in ["succeeded", "running", "cancelled", "preparing", "failed", "running"]:
        assert (await store.update_rollout(rid, status=status)).status == status
    got = await store.get_rollout_by_id(rid)
    assert got.status == "running"
    # a non-terminal status leaves end_time alone
    r = await store.enqueue_rollout(input=1)
    assert (await store.update_rollout(r.rollout_id, status="running")).end_time is None


async def test_update_rollout_to_queuing_requeues(store):
    for status in ("queuing", "requeuing"):
        ar = await store.start_rollout(input=1)
        assert await store.dequeue_rollout() is None
        await store.update_rollout(ar.rollout_id, status=status)
        again = await store.dequeue_rollout()
        assert again is not None and again.rollout_id == ar.rollout_id
        assert again.attempt.sequence_id == 2 and again.status == "preparing"
        assert await store.dequeue_rollout() is None


async def test_update_rollout_queuing_while_queued_enqueues_once(store):
    r = await store.enqueue_rollout(input=1)
    await store.update_rollout(r.rollout_id, status="queuing")
    await store.update_rollout(r.rollout_id, status="requeuing")
    first = await store.dequeue_rollout()
    assert first is not None and first.rollout_id == r.rollout_id
    assert await store.dequeue_rollout() is None


async def test_update_rollout_unknown_id_raises(store):
    with pytest.raises(ValueError, match=r"Item.*does not exist"):
        await store.update_rollout("ro-doesnotexist", status="failed")

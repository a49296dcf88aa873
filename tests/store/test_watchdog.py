"""The lazy watchdog with debounce 0: timeout and unresponsive detection, retries, revival (§1.3, §1.4, §1.5)."""

from __future__ import annotations

from agl_events.types import RolloutConfig
from tests.store import make_span

TIMEOUT_RETRY = RolloutConfig(timeout_seconds=0.1, max_attempts=2, retry_condition=["timeout"])
UNRESPONSIVE = RolloutConfig(unresponsive_seconds=0.2)
UNRESPONSIVE_RETRY = RolloutConfig(unresponsive_seconds=0.2, max_attempts=2, retry_condition=["unresponsive"])


async def test_timeout_with_retry_requeues_then_fails(store, clock):
    r = await store.enqueue_rollout(input=1, config=TIMEOUT_RETRY)
    d = await store.dequeue_rollout(worker_id="w1")
    clock.advance(0.15)
    attempts = await store.query_attempts(r.rollout_id)
    assert [a.status for a in attempts] == ["timeout"] and attempts[0].end_time is None
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.status == "requeuing" and got.end_time is None
    w = await store.get_worker_by_id("w1")
    assert w.status == "unknown" and w.current_rollout_id is None
    again = await store.dequeue_rollout(worker_id="w2")
    assert again.rollout_id == r.rollout_id and again.attempt.sequence_id == 2
    assert again.attempt.attempt_id != d.attempt.attempt_id
    # the second timeout exhausts max_attempts=2
    clock.advance(0.15)
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.status == "failed" and got.end_time is not None
    assert [a.status for a in await store.query_attempts(r.rollout_id)] == ["timeout", "timeout"]
    assert await store.dequeue_rollout() is None


async def test_timeout_applies_even_with_heartbeats(store, clock):
    ar = await store.start_rollout(input=1, config=RolloutConfig(timeout_seconds=0.1))
    await store.add_span(make_span(ar.rollout_id, ar.attempt.attempt_id, 1))
    clock.advance(0.15)
    got = await store.get_rollout_by_id(ar.rollout_id)
    assert got.attempt.status == "timeout" and got.status == "failed"


async def test_unresponsive_without_retry_fails(store, clock):
    ar = await store.start_rollout(input=1, config=UNRESPONSIVE, worker_id="w1")
    clock.advance(0.25)
    attempts = await store.query_attempts(ar.rollout_id)
    assert [a.status for a in attempts] == ["unresponsive"] and attempts[0].end_time is None
    got = await store.get_rollout_by_id(ar.rollout_id)
    assert got.status == "failed" and got.end_time is not None
    assert (await store.get_worker_by_id("w1")).status == "unknown"


async def test_a_running_rollout_without_an_attempt_is_queued_again_once_silent(store, clock):
    """The state a claim leaves when the store dies between its rollout event and its AttemptCreated (the
    chaos run met it: the rollout stayed running for good, no runner holding an attempt of it)."""
    r = await store.enqueue_rollout(input=1, config=UNRESPONSIVE_RETRY)
    await store.update_rollout(r.rollout_id, status="running")
    clock.advance(0.1)
    assert (await store.get_rollout_by_id(r.rollout_id)).status == "running"
    clock.advance(0.15)
    assert (await store.get_rollout_by_id(r.rollout_id)).status == "requeuing"
    again = await store.dequeue_rollout(worker_id="w1")
    assert again.rollout_id == r.rollout_id and again.attempt.sequence_id == 1


async def test_a_running_rollout_without_an_attempt_fails_once_silent_without_retries(store, clock):
    r = await store.enqueue_rollout(input=1, config=UNRESPONSIVE)
    await store.update_rollout(r.rollout_id, status="running")
    clock.advance(0.25)
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.status == "failed" and got.end_time is not None


async def test_unresponsive_measured_from_last_heartbeat(store, clock):
    ar = await store.start_rollout(input=1, config=UNRESPONSIVE)
    clock.advance(0.12)
    await store.add_span(make_span(ar.rollout_id, ar.attempt.attempt_id, 1))
    clock.advance(0.12)  # 0.24 s since start, 0.12 s since the heartbeat
    assert (await store.get_latest_attempt(ar.rollout_id)).status == "running"
    clock.advance(0.15)
    assert (await store.get_latest_attempt(ar.rollout_id)).status == "unresponsive"


async def test_span_revives_unresponsive_attempt(store, clock):
    ar = await store.start_rollout(input=1, config=UNRESPONSIVE)
    clock.advance(0.25)
    got = await store.get_rollout_by_id(ar.rollout_id)
    assert got.attempt.status == "unresponsive" and got.status == "failed"
    await store.add_span(make_span(ar.rollout_id, ar.attempt.attempt_id, 1))
    attempt = await store.get_latest_attempt(ar.rollout_id)
    assert attempt.status == "running" and attempt.last_heartbeat_time is not None
    # the rollout had already failed: a span only promotes preparing/requeuing rollouts
    assert (await store.get_rollout_by_id(ar.rollout_id)).status == "failed"


async def test_recovery_while_requeuing(store, clock):
    r = await store.enqueue_rollout(input=1, config=UNRESPONSIVE_RETRY)
    d = await store.dequeue_rollout()
    clock.advance(0.25)
    assert (await store.get_rollout_by_id(r.rollout_id)).status == "requeuing"
    await store.add_span(make_span(r.rollout_id, d.attempt.attempt_id, 1))
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got.status == "running" and got.attempt.status == "running"
    assert got.attempt.attempt_id == d.attempt.attempt_id
    assert await store.dequeue_rollout() is None


async def test_recovery_after_new_attempt_leaves_rollout_preparing(store, clock):
    r = await store.enqueue_rollout(input=1, config=UNRESPONSIVE_RETRY)
    first = await store.dequeue_rollout()
    clock.advance(0.25)
    second = await store.dequeue_rollout()
    assert second.rollout_id == r.rollout_id and second.attempt.sequence_id == 2
    await store.add_span(make_span(r.rollout_id, first.attempt.attempt_id, 1))
    attempts = await store.query_attempts(r.rollout_id)
    assert [a.status for a in attempts] == ["running", "preparing"]
    assert (await store.get_rollout_by_id(r.rollout_id)).status == "preparing"


async def test_healthy_and_unconfigured_rollouts_untouched(store, clock):
    quiet = await store.start_rollout(input=1)  # no timeouts configured
    slow = await store.start_rollout(input=2, config=RolloutConfig(timeout_seconds=60, unresponsive_seconds=60))
    clock.advance(0.15)
    await store.query_rollouts()
    for ar in (quiet, slow):
        got = await store.get_rollout_by_id(ar.rollout_id)
        assert got.status == "preparing" and got.attempt.status == "preparing"


async def test_queued_and_finished_rollouts_are_not_scanned(store, clock):
    queued = await store.enqueue_rollout(input=1, config=RolloutConfig(timeout_seconds=0.05))
    done = await store.start_rollout(input=2, config=RolloutConfig(timeout_seconds=0.05))
    await store.update_attempt(done.rollout_id, "latest", status="succeeded")
    clock.advance(0.1)
    assert (await store.get_rollout_by_id(queued.rollout_id)).status == "queuing"
    got = await store.get_rollout_by_id(done.rollout_id)
    assert got.status == "succeeded" and got.attempt.status == "succeeded"
    # the timeout clock starts at the attempt, not the rollout: a fresh dequeue is healthy
    d = await store.dequeue_rollout()
    assert d.rollout_id == queued.rollout_id and d.attempt.status == "preparing"

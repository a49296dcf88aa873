"""Runner processes on the task topic, against the real broker and a real store server."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.writer import EventWriter
from agl_events.runner.control import stop_request
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.embedded import embedded_store_server
from agl_events.server.process import StoreProcess
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import EnqueueRolloutRequest, RolloutConfig
from tests.eventually import eventually, eventually_async
from tests.orphans import exited, orphan
from tests.runner.agents import SPANS_PER_ROLLOUT, HangOnFirstAttempt, SlowOrFast, counting_agent, waiting_agent

pytestmark = pytest.mark.kafka


async def _wait_finished(store: KafkaLightningStore, ids: list[str], deadline_s: float) -> dict[str, str]:
    """Statuses of the rollouts once all finished (each long poll waits up to a second for the pending ones)."""
    done: dict[str, str] = {}

    async def finished() -> dict[str, str]:
        pending = [rid for rid in ids if rid not in done]
        for rollout in await store.wait_for_rollouts(rollout_ids=pending, timeout=1.0):
            done[rollout.rollout_id] = rollout.status
        return done

    return await eventually_async(finished, f"all {len(ids)} rollouts finished", within=deadline_s,
                                  until=lambda statuses: len(statuses) == len(ids))


async def _rollout(http: httpx.AsyncClient, rid: str) -> dict[str, Any]:
    answer: dict[str, Any] = (await http.get(f"/rollouts/{rid}")).json()
    return answer


#: Rollouts of the four-runner test: 50 a runner keep all four claiming from the task topic at once for the whole
#: run, which is what exactly-once is about (500 until 2026-12-06: the same races 2.5 times over, 3 queries each).
ROLLOUTS = 200


async def test_four_runners_complete_their_rollouts_exactly_once(settings: Settings, tmp_path: Path) -> None:
    async with embedded_store_server(settings, tmp_path / "view") as (store, url):
        pool = RunnerPool(RunnerConfig(settings=settings, store_url=url, agent="x"), 4, agent=counting_agent)
        pool.start()
        try:
            started = time.perf_counter()
            queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(ROLLOUTS)])
            ids = [r.rollout_id for r in queued]
            statuses = await _wait_finished(store, ids, deadline_s=240)
            print(f"{ROLLOUTS} rollouts on 4 runners in {time.perf_counter() - started:.1f} s")
            assert Counter(statuses.values()) == {"succeeded": ROLLOUTS}
            runners = Counter()
            for rid in ids:
                # a finish is two events on two topics (AttemptUpdated, then RolloutStatusChanged), each folded as
                # its topic is read back: before the call is answered a reader may see the status first (seen
                # under two pytest workers, while the runner's finish call timed out on a slow store)
                attempts = list(await eventually_async(lambda rid=rid: store.query_attempts(rid), f"{rid}'s attempt",
                                                       until=lambda page: all(a.status != "running" for a in page)))
                assert [a.status for a in attempts] == ["succeeded"], rid  # exactly one attempt each
                runners[attempts[0].worker_id] += 1
                spans = list(await store.query_spans(rid))
                assert [s.sequence_id for s in spans] == list(range(1, SPANS_PER_ROLLOUT + 1)), rid
                assert {s.attempt_id for s in spans} == {attempts[0].attempt_id}
                assert spans[-1].attributes["agentlightning.reward.0.value"] == (await store.get_rollout_by_id(rid)
                                                                                ).input["i"] / 1000.0
            print("rollouts per runner:", dict(runners))
            assert len(runners) == 4, "every runner took work"

            async def heartbeats_in() -> bool:
                """Heartbeats run beside the rollouts (the wait above was for these): each runner's in the view."""
                workers = [await store.get_worker_by_id(runner_id) for runner_id in runners]
                return all(w is not None and w.heartbeat_stats for w in workers)

            await eventually_async(heartbeats_in, "every runner's heartbeat")
            for runner_id in runners:  # runners serve no /metrics: their heartbeats carry the span back-pressure
                worker = await store.get_worker_by_id(runner_id)
                assert worker is not None and set(worker.heartbeat_stats["span_backpressure"]) == {"waits", "seconds"}
        finally:
            pool.stop(grace=30)


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


async def test_runners_with_slots_run_rollouts_at_once_exactly_once(settings: Settings, tmp_path: Path) -> None:
    """Two runners of 8 slots each, an async agent that waits: each runner overlaps its rollouts (claimed and
    finished in batches), and every rollout still runs once, with its own gap-free spans."""
    async with embedded_store_server(settings, tmp_path / "view") as (store, url):
        config = RunnerConfig(settings=settings, store_url=url, agent="x", concurrency=8)
        pool = RunnerPool(config, 2, agent=waiting_agent)
        pool.start()
        try:
            queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(48)])
            ids = [r.rollout_id for r in queued]
            statuses = await _wait_finished(store, ids, deadline_s=120)
            assert Counter(statuses.values()) == {"succeeded": 48}
            windows: dict[str, list[tuple[float, float]]] = {}
            for rid in ids:
                attempts = list(await store.query_attempts(rid))
                assert [a.status for a in attempts] == ["succeeded"], rid
                spans = list(await store.query_spans(rid))
                assert [(s.sequence_id, s.attempt_id) for s in spans] == [(1, attempts[0].attempt_id),
                                                                           (2, attempts[0].attempt_id)], rid
                assert spans[1].attributes["agentlightning.reward.0.value"] == (await store.get_rollout_by_id(rid)
                                                                                ).input["i"] / 1000.0
                windows.setdefault(attempts[0].worker_id, []).append((spans[0].start_time, spans[0].end_time))
            assert len(windows) == 2 and all(_most_at_once(w) > 1 for w in windows.values()), windows
        finally:
            pool.stop(grace=30)


async def test_a_slow_rollout_does_not_hold_back_the_others(settings: Settings, tmp_path: Path) -> None:
    async with embedded_store_server(settings, tmp_path / "view") as (store, url):
        pool = RunnerPool(RunnerConfig(settings=settings, store_url=url, agent="x"), 2, agent=SlowOrFast())
        pool.start()
        try:
            slow = await store.enqueue_rollout(input={"sleep": 60})
            fast = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"sleep": 0}) for _ in range(20)])
            statuses = await _wait_finished(store, [r.rollout_id for r in fast], deadline_s=50)
            assert Counter(statuses.values()) == {"succeeded": 20}
            assert (await store.get_rollout_by_id(slow.rollout_id)).status in ("preparing", "running")
        finally:
            pool.stop(grace=1)  # the slow one is still running: kill after a second


async def test_a_runner_killed_mid_rollout_has_it_retried_elsewhere(settings: Settings, tmp_path: Path) -> None:
    config = RolloutConfig(unresponsive_seconds=3, max_attempts=2, retry_condition=["unresponsive", "timeout"])
    async with embedded_store_server(settings, tmp_path / "view", scan_debounce_seconds=0.5) as (store, url):
        pool = RunnerPool(RunnerConfig(settings=settings, store_url=url, agent="x"), 2, agent=HangOnFirstAttempt())
        pool.start()
        try:
            rollout = await store.enqueue_rollout(input={"hang": True}, config=config)
            first = await eventually_async(lambda: store.get_latest_attempt(rollout.rollout_id),
                                           "a runner's attempt at the rollout", within=30,
                                           until=lambda attempt: attempt is not None and bool(attempt.worker_id))
            victim = next(p for p in pool.processes if p.name == first.worker_id)
            os.kill(victim.pid, signal.SIGKILL)
            statuses = await _wait_finished(store, [rollout.rollout_id], deadline_s=90)
            assert statuses == {rollout.rollout_id: "succeeded"}
            attempts = list(await store.query_attempts(rollout.rollout_id))
            assert [a.status for a in attempts] == ["unresponsive", "succeeded"]
            assert attempts[1].worker_id != first.worker_id
            assert (await store.get_worker_by_id(first.worker_id)).status == "unknown"
        finally:
            pool.stop(grace=5)


async def test_cooperative_stop_ends_every_runner(settings: Settings, tmp_path: Path) -> None:
    async with embedded_store_server(settings, tmp_path / "view") as (store, url):
        pool = RunnerPool(RunnerConfig(settings=settings, store_url=url, agent="x"), 3, agent=counting_agent)
        pool.start()
        queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(6)])
        await _wait_finished(store, [r.rollout_id for r in queued], deadline_s=120)  # runners are up and working
        writer = EventWriter(settings.bootstrap_servers, settings.experiment, AvroCodec(), producer_id="test")
        writer.append_sync([stop_request("test", time.time(), reason="test")])
        writer.close()
        started = time.monotonic()
        for process in pool.processes:  # joined off the loop: the store on it still answers their last calls
            await asyncio.to_thread(process.join, 30)
        print(f"runners stopped {time.monotonic() - started:.1f} s after the stop event")
        assert [p.exitcode for p in pool.processes] == [0, 0, 0]
        pool.stop(grace=1)


async def test_a_runner_rides_through_a_store_restart_and_reports_its_rollout(settings: Settings,
                                                                             tmp_path: Path) -> None:
    """The store is killed while the agent works and is back a moment later: the runner's report of the end
    is retried until it lands, so the rollout succeeds on its one attempt and the runner lives on."""
    server = StoreProcess(settings, tmp_path / "views", tmp_path / "store.log")
    server.start()
    pool = RunnerPool(RunnerConfig(settings=settings, store_url=f"http://127.0.0.1:{server.port}", agent="x"), 1,
                      agent=SlowOrFast())
    pool.start()
    try:
        async with httpx.AsyncClient(base_url=server.base, timeout=30) as http:
            started = tmp_path / "agent-started"
            enqueued = await http.post("/queues/rollouts/enqueue",
                                       json={"rollouts": [{"input": {"sleep": 2, "started": str(started)}}]})
            rid = enqueued.json()[0]["rollout_id"]
            # The agent itself, not the rollout's status: the store shows `running` once it decided the claim,
            # before its answer reaches the runner, and a store killed in between leaves an attempt no runner
            # knows of (the watchdog's to retry, past this test's wait; the claim is given back and refused).
            await eventually_async(started.exists, "the runner got its claim and the agent sleeps")
            server.kill9()
            await asyncio.sleep(4.0)  # longer than the agent's sleep: its end is reported while the store is down
            server.start()
            rollout = await eventually_async(lambda: _rollout(http, rid), "the rollout succeeded", within=60,
                                             until=lambda rollout: rollout["status"] == "succeeded")
            attempts = (await http.get(f"/rollouts/{rid}/attempts")).json()["items"]
        assert rollout["status"] == "succeeded" and [a["status"] for a in attempts] == ["succeeded"]
        assert pool.alive() == pool.processes
    finally:
        pool.stop(grace=5)
        server.stop()


#: A parent that starts a pool of one runner (its store need not answer), says the runner's pid, and waits to be
#: SIGKILLed.
ORPHANING_PARENT = """
import json, sys, threading
from agl_events.config import Settings
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from tests.runner.agents import counting_agent
settings = Settings.model_validate(json.loads(sys.stdin.read()))
pool = RunnerPool(RunnerConfig(settings=settings, store_url="http://127.0.0.1:9", agent="x"), 1, agent=counting_agent)
pool.start()
print(pool.processes[0].pid, flush=True)
threading.Event().wait()
"""


def test_a_pool_runner_stops_when_the_process_that_started_it_is_killed(settings: Settings) -> None:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)  # the runner polls its queue
    line, parent = orphan(ORPHANING_PARENT, settings.model_dump_json())
    runner = int(line)
    eventually(lambda: exited(runner), f"the orphaned runner {runner} exits", within=60)
    assert parent.stderr is not None
    log = parent.stderr.read()  # the runner's too (inherited): to its end, now that it exited
    assert "Traceback" not in log, log  # it stopped, rather than failed

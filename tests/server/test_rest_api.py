"""The `/v1/agl` API driven by upstream's unchanged `LightningStoreClient`: proof of wire compatibility.

Every test runs against a real uvicorn server (see conftest) and checks only what goes over the wire, so the
same tests hold for any backend `store_factory` provides. Raw HTTP checks live in `test_rest_http.py`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest

pytestmark = pytest.mark.asyncio


def _llm(model: str) -> Any:
    from agentlightning.types import LLM

    return LLM(endpoint="http://llm.local/v1", model=model, sampling_parameters={"temperature": 0.5})


async def test_enqueue_dequeue_is_fifo_and_tracks_the_worker(client: Any) -> None:
    from agentlightning.types import EnqueueRolloutRequest

    first = await client.enqueue_rollout(input={"task": 1}, mode="train", metadata={"k": "v"})
    assert first.status == "queuing" and first.rollout_id.startswith("ro-") and first.metadata == {"k": "v"}
    more = await client.enqueue_many_rollouts(
        [EnqueueRolloutRequest(input={"task": 2}), EnqueueRolloutRequest(input={"task": 3}, mode="val")]
    )
    assert [r.input for r in more] == [{"task": 2}, {"task": 3}]

    claimed = await client.dequeue_rollout(worker_id="w1")
    assert claimed.rollout_id == first.rollout_id and claimed.status == "preparing"
    assert claimed.attempt.sequence_id == 1 and claimed.attempt.worker_id == "w1"
    assert claimed.attempt.attempt_id.startswith("at-")
    worker = await client.get_worker_by_id("w1")
    assert worker.status == "busy" and worker.current_rollout_id == first.rollout_id

    rest = await client.dequeue_many_rollouts(limit=5, worker_id="w2")
    assert [r.rollout_id for r in rest] == [r.rollout_id for r in more]
    assert await client.dequeue_rollout(worker_id="w3") is None
    assert (await client.get_worker_by_id("w3")).status == "idle"


async def test_start_rollout_and_manual_attempts(client: Any) -> None:
    started = await client.start_rollout(input="prompt", mode="test", metadata={"m": 1}, worker_id="w1")
    assert started.status == "preparing" and started.attempt.sequence_id == 1
    retry = await client.start_attempt(started.rollout_id, worker_id="w2")
    assert retry.attempt.sequence_id == 2 and retry.attempt.worker_id == "w2"
    third = await client.start_attempt(started.rollout_id)  # no body at all on the wire
    assert third.attempt.sequence_id == 3 and third.attempt.worker_id is None

    attempts = await client.query_attempts(started.rollout_id)
    assert [a.sequence_id for a in attempts] == [1, 2, 3] and attempts.total == 3
    page = await client.query_attempts(started.rollout_id, sort_order="desc", limit=2, offset=1)
    assert [a.sequence_id for a in page] == [2, 1] and (page.limit, page.offset, page.total) == (2, 1, 3)
    assert (await client.get_latest_attempt(started.rollout_id)).sequence_id == 3

    fetched = await client.get_rollout_by_id(started.rollout_id)
    assert type(fetched).__name__ == "AttemptedRollout" and fetched.attempt.sequence_id == 3
    assert await client.get_rollout_by_id("ro-missing") is None
    assert await client.get_latest_attempt("ro-missing") is None


async def test_failed_attempt_is_retried_then_succeeds(client: Any) -> None:
    from agentlightning.types import RolloutConfig

    config = RolloutConfig(max_attempts=2, retry_condition=["failed"])
    rollout = await client.enqueue_rollout(input={"q": "2+2"}, config=config)
    first = await client.dequeue_rollout(worker_id="w1")
    attempt = await client.update_attempt(
        rollout.rollout_id, first.attempt.attempt_id, status="running", last_heartbeat_time=time.time(),
        metadata={"step": 1},
    )
    assert attempt.status == "running" and attempt.metadata == {"step": 1}

    failed = await client.update_attempt(rollout.rollout_id, "latest", status="failed")
    assert failed.status == "failed" and failed.end_time is not None
    assert (await client.get_rollout_by_id(rollout.rollout_id)).status == "requeuing"

    second = await client.dequeue_rollout(worker_id="w2")
    assert second.rollout_id == rollout.rollout_id and second.attempt.sequence_id == 2
    await client.update_attempt(rollout.rollout_id, "latest", status="succeeded")
    done = await client.wait_for_rollouts(rollout_ids=[rollout.rollout_id, "ro-unknown"], timeout=0.1)
    assert [r.rollout_id for r in done] == [rollout.rollout_id] and done[0].status == "succeeded"
    assert done[0].end_time is not None


async def test_failed_attempt_without_retry_fails_the_rollout(client: Any) -> None:
    rollout = await client.start_rollout(input="x")
    await client.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="failed")
    assert (await client.get_rollout_by_id(rollout.rollout_id)).status == "failed"
    assert await client.dequeue_rollout() is None


async def test_update_rollout_applies_only_given_fields(client: Any) -> None:
    from agentlightning.types import RolloutConfig

    rollout = await client.enqueue_rollout(input="x", mode="train", metadata={"a": 1})
    updated = await client.update_rollout(rollout.rollout_id, metadata={"b": 2})
    assert updated.mode == "train" and updated.metadata == {"b": 2} and updated.status == "queuing"
    updated = await client.update_rollout(
        rollout.rollout_id, status="cancelled", config=RolloutConfig(timeout_seconds=5.0), mode=None
    )
    assert updated.status == "cancelled" and updated.end_time is not None and updated.mode is None
    assert updated.config.timeout_seconds == 5.0


async def test_query_rollouts_filters_sorting_and_pages(client: Any) -> None:
    queued = [await client.enqueue_rollout(input=i) for i in range(3)]
    running = await client.start_rollout(input="s")
    everything = await client.query_rollouts()
    assert everything.total == 4 and len(everything) == 4
    kinds = {r.rollout_id: type(r).__name__ for r in everything}
    assert kinds[running.rollout_id] == "AttemptedRollout" and kinds[queued[0].rollout_id] == "Rollout"

    assert [r.rollout_id for r in await client.query_rollouts(status_in=["preparing"])] == [running.rollout_id]
    assert len(await client.query_rollouts(status_in=[])) == 0
    by_id = await client.query_rollouts(rollout_id_in=[queued[1].rollout_id, running.rollout_id])
    assert {r.rollout_id for r in by_id} == {queued[1].rollout_id, running.rollout_id}
    contains = await client.query_rollouts(rollout_id_contains=queued[2].rollout_id[3:])
    assert [r.rollout_id for r in contains] == [queued[2].rollout_id]
    either = await client.query_rollouts(
        status_in=["preparing"], rollout_id_in=[queued[0].rollout_id], filter_logic="or"
    )
    assert {r.rollout_id for r in either} == {running.rollout_id, queued[0].rollout_id}
    both = await client.query_rollouts(status_in=["preparing"], rollout_id_in=[queued[0].rollout_id])
    assert len(both) == 0

    page = await client.query_rollouts(sort_by="start_time", sort_order="desc", limit=2, offset=1)
    assert [r.rollout_id for r in page] == [queued[2].rollout_id, queued[1].rollout_id]
    assert (page.limit, page.offset, page.total) == (2, 1, 4)
    assert len(await client.query_rollouts(offset=10)) == 0


async def test_spans_over_rest(client: Any) -> None:
    from agentlightning.types import Span

    rollout = await client.start_rollout(input="x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    assert await client.get_next_span_sequence_id(rid, aid) == 1
    spans = [
        Span.from_attributes(rollout_id=rid, attempt_id=aid, sequence_id=10 + i, name=f"llm.call.{i}",
                             attributes={"i": i, "tags": ["a", "b"]})
        for i in range(3)
    ]
    stored = await client.add_span(spans[0])
    assert stored is not None and stored.span_id == spans[0].span_id and stored.attributes["tags"] == ["a", "b"]
    assert await client.add_span(spans[0]) is None  # duplicate: 201 with a null body
    assert len(await client.add_many_spans(spans)) == 2
    # An explicit sequence id bumps the per-rollout counter.
    assert await client.get_next_span_sequence_id(rid, aid) == 13

    everything = await client.query_spans(rid)
    assert [s.sequence_id for s in everything] == [10, 11, 12] and everything.total == 3
    latest = await client.query_spans(rid, "latest", sort_order="desc", limit=2)
    assert [s.name for s in latest] == ["llm.call.2", "llm.call.1"] and latest.total == 3
    named = await client.query_spans(rid, name="llm.call.1")
    assert [s.span_id for s in named] == [spans[1].span_id]
    either = await client.query_spans(rid, name="llm.call.0", span_id=spans[2].span_id, filter_logic="or")
    assert {s.span_id for s in either} == {spans[0].span_id, spans[2].span_id}
    assert len(await client.query_spans(rid, name_contains="call", offset=2)) == 1
    assert len(await client.query_spans("ro-unknown")) == 0


async def test_an_oversized_span_is_a_413_and_the_store_keeps_serving(client: Any) -> None:
    from agentlightning.types import Span

    rollout = await client.start_rollout(input="x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    huge = Span.from_attributes(rollout_id=rid, attempt_id=aid, sequence_id=1, name="huge",
                                attributes={"blob": "x" * (9 * 1024 * 1024)})
    async with asyncio.timeout(60):  # a wedged committer would hang this call and every later one
        with pytest.raises(aiohttp.ClientResponseError) as raised:
            await client.add_span(huge)
        assert raised.value.status == 413  # the client's fault: raised at once, not retried
        small = Span.from_attributes(rollout_id=rid, attempt_id=aid, sequence_id=2, name="small", attributes={})
        assert (await client.add_span(small)).span_id == small.span_id
        assert (await client.enqueue_rollout(input="y")).status == "queuing"
        assert [s.name for s in await client.query_spans(rid)] == ["small"]


async def test_add_otel_span_through_the_client(client: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("agent.step", attributes={"k": "v"}) as span:
        span.add_event("thinking", {"n": 1})
    readable = exporter.get_finished_spans()[0]

    rollout = await client.start_rollout(input="x")
    stored = await client.add_otel_span(rollout.rollout_id, rollout.attempt.attempt_id, readable)
    assert stored is not None and stored.sequence_id == 1 and stored.name == "agent.step"
    found = (await client.query_spans(rollout.rollout_id)).items
    assert len(found) == 1 and found[0].attributes == {"k": "v"} and found[0].events[0].name == "thinking"
    assert found[0].start_time is not None and found[0].start_time < 1e11  # seconds, not nanoseconds


async def test_resources_lifecycle(client: Any) -> None:
    from agentlightning.types import PromptTemplate

    assert await client.get_latest_resources() is None
    first = await client.add_resources({"llm": _llm("m1"), "prompt": PromptTemplate(template="{q}", engine="f-string")})
    assert first.resources_id.startswith("rs-") and len(first.resources_id) == 15 and first.version == 1
    assert first.resources["prompt"].template == "{q}"
    second = await client.add_resources({"llm": _llm("m2")})
    assert (await client.get_latest_resources()).resources_id == second.resources_id

    bumped = await client.update_resources(first.resources_id, {"llm": _llm("m3")})
    assert bumped.version == 2 and bumped.create_time == first.create_time and bumped.resources["llm"].model == "m3"
    assert (await client.get_latest_resources()).resources_id == first.resources_id
    assert (await client.get_resources_by_id(second.resources_id)).resources["llm"].model == "m2"
    assert await client.get_resources_by_id("rs-unknown") is None
    created = await client.update_resources("rs-custom", {"llm": _llm("m4")})  # an upsert
    assert created.version == 1

    everything = await client.query_resources()
    assert [r.resources_id for r in everything] == [first.resources_id, second.resources_id, "rs-custom"]
    assert [r.resources_id for r in await client.query_resources(resources_id="rs-custom")] == ["rs-custom"]
    assert len(await client.query_resources(resources_id_contains="custom")) == 1
    page = await client.query_resources(sort_by="version", sort_order="desc", limit=1)
    assert page[0].resources_id == first.resources_id and page.total == 3

    rollout = await client.enqueue_rollout(input="x")
    assert rollout.resources_id == "rs-custom"  # the latest snapshot at enqueue time


async def test_workers(client: Any) -> None:
    alice = await client.update_worker("alice", heartbeat_stats={"gpu": 0.5})
    assert alice.status == "unknown" and alice.heartbeat_stats == {"gpu": 0.5} and alice.last_heartbeat_time
    kept = await client.update_worker("alice")  # no body: a heartbeat that keeps the stats
    assert kept.heartbeat_stats == {"gpu": 0.5} and kept.last_heartbeat_time >= alice.last_heartbeat_time
    await client.update_worker("bob")
    await client.enqueue_rollout(input="x")
    await client.dequeue_rollout(worker_id="bob")

    assert (await client.get_worker_by_id("bob")).status == "busy"
    assert await client.get_worker_by_id("nobody") is None
    assert {w.worker_id for w in await client.query_workers()} == {"alice", "bob"}
    assert [w.worker_id for w in await client.query_workers(status_in=["busy"])] == ["bob"]
    assert [w.worker_id for w in await client.query_workers(worker_id_contains="lic")] == ["alice"]
    either = await client.query_workers(status_in=["busy"], worker_id_contains="lic", filter_logic="or")
    assert {w.worker_id for w in either} == {"alice", "bob"}
    ordered = await client.query_workers(sort_by="worker_id", sort_order="desc")
    assert [w.worker_id for w in ordered] == ["bob", "alice"]


async def test_worker_queries_keep_upstream_order_and_defaults(client: Any) -> None:
    await client.update_worker("zed")  # no stats: the client sends no body
    await client.dequeue_rollout(worker_id="amy")  # an empty dequeue: amy is idle
    await client.update_worker("bob", heartbeat_stats={"gpu": 1})
    page = await client.query_workers()
    assert [w.worker_id for w in page] == ["zed", "amy", "bob"]  # first seen, as upstream lists them
    assert (page.limit, page.offset, page.total) == (-1, 0, 3)  # the client sends no paging: the defaults
    assert [w.worker_id for w in await client.query_workers(status_in=["idle"])] == ["amy"]
    assert [w.worker_id for w in await client.query_workers(worker_id_contains="ze")] == ["zed"]
    zed = await client.get_worker_by_id("zed")
    assert zed.status == "unknown" and zed.heartbeat_stats is None and zed.last_heartbeat_time is not None


async def test_statistics_and_wait(client: Any) -> None:
    rollout = await client.start_rollout(input="x")
    stats = await client.statistics()
    assert stats["total_rollouts"] == 1 and stats["total_attempts"] == 1 and "name" in stats
    started = time.monotonic()
    assert await client.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=0) == []
    assert await client.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=0.1) == []
    assert time.monotonic() - started < 2


async def test_client_errors_are_raised_at_once_without_retries(client_for: Any) -> None:
    # Upstream's default retry schedule (1, 2, 5 s): a retried call would take 8 s or more.
    store = client_for(retry_delays=(1.0, 2.0, 5.0), health_retry_delays=(0.1, 0.2, 0.5))
    assert await store.get_rollout_by_id("ro-missing") is None
    started = time.monotonic()
    with pytest.raises(aiohttp.ClientResponseError) as raised:
        await store.update_attempt("ro-missing", "latest", status="failed")
    assert raised.value.status == 400
    with pytest.raises(aiohttp.ClientResponseError):
        await store.update_rollout("ro-missing", status="failed")
    with pytest.raises(aiohttp.ClientResponseError):
        await store.start_attempt("ro-missing")
    assert time.monotonic() - started < 1


async def test_experiments_are_isolated(client_for: Any) -> None:
    root, exp1, exp2 = client_for(), client_for("/experiments/exp1"), client_for("/experiments/exp2/")
    default = client_for("/experiments/default")
    in_root = await root.enqueue_rollout(input="root")
    in_exp1 = await exp1.start_rollout(input="one")
    await exp1.add_resources({"llm": _llm("exp1")})

    assert [r.rollout_id for r in await root.query_rollouts()] == [in_root.rollout_id]
    assert [r.rollout_id for r in await exp1.query_rollouts()] == [in_exp1.rollout_id]
    assert len(await exp2.query_rollouts()) == 0
    assert [r.rollout_id for r in await default.query_rollouts()] == [in_root.rollout_id]
    assert await root.get_rollout_by_id(in_exp1.rollout_id) is None
    assert await root.get_latest_resources() is None
    assert (await exp1.get_latest_resources()).resources["llm"].model == "exp1"
    assert (await exp2.dequeue_rollout()) is None
    assert (await default.dequeue_rollout()).rollout_id == in_root.rollout_id
    assert exp1.otlp_traces_endpoint().endswith("/experiments/exp1/v1/traces")

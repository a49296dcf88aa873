"""Runner processes record what instrumented libraries trace: an agent calling a vLLM-shaped endpoint directly
with the openai client (no LLM proxy) gets one triplet per call out of `replay export --adapter triplet`, the
same triplets Agent Lightning 0.3.0's own runner, tracer (AgentOps) and adapter make of the same calls; spans
an agent opens with `opentelemetry.trace.get_tracer(...)` reach the span topic, also when the agent's module
set a global TracerProvider of its own."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry import trace

from agl_events.config import Settings
from agl_events.llm.fake_backend import FakeBackend
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.embedded import embedded_store_server
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import LLM, EnqueueRolloutRequest
from tests.runner.llm_agents import LOOKUP_SPAN, PLAN_SPAN, asking_agent

pytestmark = pytest.mark.kafka

MODEL = "fake-model"
#: One to three LLM calls per rollout, and a reward each.
TASKS: list[dict[str, Any]] = [
    {"questions": [f"question {i}.{j}" for j in range(1 + i % 3)], "reward": i / 10} for i in range(6)]


async def _run_on_runners(store: KafkaLightningStore, pool: RunnerPool, inputs: list[dict[str, Any]]) -> list[str]:
    """Enqueue the inputs, wait until every rollout succeeded on the pool's runners; their ids, in input order."""
    pool.start()
    try:
        queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=task) for task in inputs])
        ids = [r.rollout_id for r in queued]
        done: dict[str, str] = {}
        for _ in range(120):  # each wait returns as soon as rollouts finish
            pending = [rid for rid in ids if rid not in done]
            if not pending:
                break
            done |= {r.rollout_id: r.status for r in await store.wait_for_rollouts(rollout_ids=pending, timeout=1)}
        assert done == dict.fromkeys(ids, "succeeded")
        return ids
    finally:
        pool.stop(grace=10)


def _export_triplets(settings: Settings, out: Path) -> list[dict[str, Any]]:
    """`agl-events replay export --adapter triplet` as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers, "replay",
                           "export", "-e", settings.experiment, "--adapter", "triplet", "--format", "jsonl",
                           "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]


def _upstream_triplets(base_url: str, tasks: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Upstream's own runner (LitAgentRunner.step) with its default tracer (AgentOpsTracer) and an in-memory store
    runs the same agent on the same tasks; its TracerTraceToTriplet adapts each rollout's spans. Runs in a process
    of its own: AgentOps takes the global TracerProvider, which must stay unset in the tests' process."""
    from agentlightning import LLM as UpstreamLLM
    from agentlightning import rollout
    from agentlightning.adapter import TracerTraceToTriplet
    from agentlightning.runner.agent import LitAgentRunner
    from agentlightning.store.memory import InMemoryLightningStore
    from agentlightning.tracer.agentops import AgentOpsTracer

    from tests.runner.llm_agents import ask

    async def run() -> list[list[dict[str, Any]]]:
        store = InMemoryLightningStore()
        runner: Any = LitAgentRunner(AgentOpsTracer())
        runner.init(rollout(ask))
        runner.init_worker(0, store)
        try:
            resources = {"llm": UpstreamLLM(endpoint=base_url, model=MODEL)}
            triplets = []
            for task in tasks:
                done = await runner.step(task, resources=resources)
                spans = await store.query_spans(done.rollout_id)
                triplets.append([t.model_dump(mode="json") for t in TracerTraceToTriplet().adapt(list(spans))])
            return triplets
        finally:
            runner.teardown_worker(0)
            runner.teardown()

    return asyncio.run(run())


def _comparable_upstream(triplet: dict[str, Any]) -> dict[str, Any]:
    logprobs = triplet["response"].get("logprobs")
    return {"prompt_token_ids": triplet["prompt"]["token_ids"], "response_token_ids": triplet["response"]["token_ids"],
            "reward": triplet["reward"], "prompt": triplet["prompt"]["raw_content"],
            "response": triplet["response"]["raw_content"],
            "logprobs": None if logprobs is None else [entry["logprob"] for entry in logprobs]}


def _comparable_ours(row: dict[str, Any]) -> dict[str, Any]:
    return {"prompt_token_ids": row["prompt_token_ids"], "response_token_ids": row["response_token_ids"],
            "reward": row["reward"], "prompt": orjson.loads(row["prompt_json"])["raw_content"],
            "response": orjson.loads(row["response_json"])["raw_content"], "logprobs": row["response_logprobs"]}


async def test_direct_llm_calls_export_one_triplet_each_as_upstream_makes_them(
        settings: Settings, tmp_path: Path) -> None:
    with FakeBackend(MODEL) as backend:
        async with embedded_store_server(settings, tmp_path / "view") as (store, url):
            await store.add_resources({"llm": LLM(endpoint=backend.url, model=MODEL)})
            pool = RunnerPool(RunnerConfig(settings=settings, store_url=url, agent="x"), 2, agent=asking_agent)
            ids = await _run_on_runners(store, pool, TASKS)
            names = {span.name for span in await store.query_spans(ids[0])}
        rows = _export_triplets(settings, tmp_path / "triplets.jsonl")
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as upstream:
            theirs = upstream.submit(_upstream_triplets, backend.url, TASKS).result(timeout=300)

    calls = sum(len(task["questions"]) for task in TASKS)
    print(f"{len(rows)} triplet rows exported from {len(ids)} rollouts of {calls} LLM calls; first: "
          f"{_comparable_ours(rows[0]) if rows else None}")
    assert len(rows) == calls == sum(len(t) for t in theirs), (len(rows), calls)
    for rid, task, expected in zip(ids, TASKS, theirs, strict=True):
        ours = sorted((row for row in rows if row["rollout_id"] == rid), key=lambda row: row["index"])
        assert [_comparable_ours(row) for row in ours] == [_comparable_upstream(t) for t in expected], task
        assert all(row["prompt_token_ids"] and row["response_token_ids"] for row in ours)
        assert ours[-1]["reward"] == task["reward"]
    assert {PLAN_SPAN, "openai.chat.completion"} <= names, names
    # The process that started the runners (as the Trainer's does) keeps its global provider: none was set here.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


async def test_spans_of_the_agents_own_tracer_reach_the_span_topic_beside_its_own_provider(
        settings: Settings, tmp_path: Path) -> None:
    """The agent's module sets a global provider of its own at import; the runner's tracer joins it, so the span
    the agent opens through `get_tracer` and the async client's call (with vLLM's token ids) are recorded."""
    with FakeBackend(MODEL) as backend:
        async with embedded_store_server(settings, tmp_path / "view") as (store, url):
            await store.add_resources({"llm": LLM(endpoint=backend.url, model=MODEL)})
            config = RunnerConfig(settings=settings, store_url=url, agent="tests.runner.own_provider_agent:agent")
            ids = await _run_on_runners(store, RunnerPool(config, 1), [{"question": f"q{i}"} for i in range(3)])
            for i, rid in enumerate(ids):
                spans = {span.name: span for span in await store.query_spans(rid)}
                assert spans[LOOKUP_SPAN].attributes["question"] == f"q{i}"
                call = spans["openai.chat.completion"]
                assert call.parent_id == spans[LOOKUP_SPAN].context.span_id
                assert call.attributes["gen_ai.prompt.0.content"] == f"q{i}"
                assert call.attributes["prompt_token_ids"] and call.attributes["response_token_ids"]

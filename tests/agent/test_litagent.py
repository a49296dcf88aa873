"""LitAgent and @rollout: sync and async agents run through one call, resources are injected by
parameter name, and what an agent returns ends up as spans of its attempt in the log."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from agl_events import LitAgent, emit_reward, rollout
from agl_events.agent import llm_rollout, prompt_rollout
from agl_events.emitter import find_final_reward
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.writer import EventWriter
from agl_events.runner.results import record_result
from agl_events.tracer import KafkaTracer
from agl_events.types import LLM, Attempt, AttemptedRollout, PromptTemplate, ProxyLLM, Rollout
from tests.agent import read_spans


def attempted(mode: str | None = "train", rid: str = "ro-1", aid: str = "at-1") -> AttemptedRollout:
    return AttemptedRollout(rollout_id=rid, input={"q": 1}, start_time=1.0, mode=mode,
                            attempt=Attempt(rollout_id=rid, attempt_id=aid, sequence_id=1, start_time=1.0))


RESOURCES: dict[str, Any] = {
    "main_llm": ProxyLLM(endpoint="http://proxy:4000/v1", model="m", sampling_parameters={"temperature": 0.5}),
    "other_llm": LLM(endpoint="http://other", model="o"),
    "prompt": PromptTemplate(template="Q: {q}", engine="f-string"),
}


class SyncAgent(LitAgent[dict[str, int]]):
    def rollout(self, task: dict[str, int], resources: Any, rollout: Rollout) -> float:
        return float(task["q"]) / 2


class AsyncAgent(LitAgent[dict[str, int]]):
    async def rollout(self, task: dict[str, int], resources: Any, rollout: Rollout) -> float:
        await asyncio.sleep(0)
        return float(task["q"]) * 2


class SplitAgent(LitAgent[str]):
    def training_rollout(self, task: str, resources: Any, rollout: Rollout) -> str:  # type: ignore[override]
        return f"train:{task}"

    async def validation_rollout(self, task: str, resources: Any, rollout: Rollout) -> str:  # type: ignore[override]
        return f"val:{task}"


class UpstreamStyleAgent(LitAgent[str]):
    """Written against upstream's API: `rollout_async` / `validation_rollout_async`."""

    async def rollout_async(self, task: str, resources: Any, rollout: Rollout) -> str:  # type: ignore[override]
        return f"async:{task}"

    async def validation_rollout_async(self, task: str, resources: Any, rollout: Rollout) -> str:  # type: ignore[override]
        return f"async-val:{task}"


def test_sync_and_async_agents_run_through_execute() -> None:
    task = {"q": 3}
    assert asyncio.run(SyncAgent().execute(task, RESOURCES, attempted())) == 1.5
    assert asyncio.run(AsyncAgent().execute(task, RESOURCES, attempted())) == 6.0
    assert SyncAgent().execute_sync(task, RESOURCES, attempted()) == 1.5
    assert AsyncAgent().execute_sync(task, RESOURCES, attempted()) == 6.0
    assert not SyncAgent().is_async() and AsyncAgent().is_async()
    with pytest.raises(NotImplementedError):
        LitAgent().execute_sync(task, RESOURCES, attempted())


def test_mode_picks_the_training_or_validation_hook() -> None:
    agent, upstream = SplitAgent(), UpstreamStyleAgent()
    assert agent.execute_sync("t", {}, attempted("train")) == "train:t"
    assert agent.execute_sync("t", {}, attempted(None)) == "train:t"
    assert agent.execute_sync("t", {}, attempted("val")) == "val:t"
    assert agent.execute_sync("t", {}, attempted("test")) == "val:t"
    assert upstream.uses_async_api() and upstream.is_async()
    assert upstream.execute_sync("t", {}, attempted("train")) == "async:t"
    assert upstream.execute_sync("t", {}, attempted("val")) == "async-val:t"


def test_trainer_and_runner_references_are_weak() -> None:
    class Runner:
        tracer = "the-tracer"

    agent, runner = SyncAgent(), Runner()
    with pytest.raises(ValueError, match="Runner has not been set"):
        agent.get_runner()
    agent.set_runner(runner)
    assert agent.runner is runner and agent.tracer == "the-tracer"
    del runner
    with pytest.raises(ValueError, match="garbage collected"):
        agent.get_runner()


def test_rollout_decorator_injects_resources_by_name() -> None:
    seen: dict[str, Any] = {}

    @rollout
    def with_llm(task: dict[str, int], llm: LLM, rollout: Rollout) -> float:
        seen["llm"], seen["rollout"] = llm, rollout
        return 1.0

    @rollout
    async def with_prompt(task: dict[str, int], prompt_template: PromptTemplate) -> str:
        return prompt_template.template.format(**task)

    @rollout
    def with_resources(task: str, resources: dict[str, Any]) -> list[str]:
        return sorted(resources)

    @rollout
    def bare(task: str) -> None:
        seen["bare"] = task

    run = attempted(rid="ro-9", aid="at-3")
    assert with_llm.execute_sync({"q": 1}, RESOURCES, run) == 1.0
    assert type(seen["llm"]) is LLM  # the ProxyLLM, resolved to this attempt's route
    assert seen["llm"].endpoint == "http://proxy:4000/rollout/ro-9/attempt/at-3/v1"
    assert seen["llm"].sampling_parameters == {"temperature": 0.5} and seen["rollout"] is run
    assert with_prompt.is_async() and inspect.iscoroutinefunction(with_prompt.rollout)
    assert not inspect.iscoroutinefunction(with_resources.rollout)
    assert with_prompt.execute_sync({"q": 7}, RESOURCES, run) == "Q: 7"
    assert with_resources.execute_sync("t", RESOURCES, run) == ["main_llm", "other_llm", "prompt"]
    assert bare.execute_sync("hello", {}, run) is None and seen["bare"] == "hello"
    assert with_llm({"q": 1}, LLM(endpoint="e", model="m"), run) == 1.0  # still the function
    assert with_llm.__name__ == "with_llm"


def test_rollout_decorator_options_and_refusals() -> None:
    @rollout(strip_proxy=False)
    def keeps_proxy(task: str, llm: LLM) -> str:
        return type(llm).__name__

    assert keeps_proxy.execute_sync("t", RESOURCES, attempted()) == "ProxyLLM"
    with pytest.raises(ValueError, match="AttemptedRollout"):
        rollout(lambda task, llm: None).execute_sync(
            "t", RESOURCES, Rollout(rollout_id="r", input=None, start_time=1.0))
    with pytest.raises(ValueError, match="No LLM resource"):
        rollout(lambda task, llm: None).execute_sync("t", {}, attempted())
    with pytest.raises(NotImplementedError, match="cannot fill 'database'"):
        rollout(lambda task, database: None)
    with pytest.raises(ValueError, match="'task' and 'llm'"):
        llm_rollout(lambda task, resources: None)
    assert prompt_rollout(lambda task, prompt_template: prompt_template.engine).execute_sync(
        "t", RESOURCES, attempted()) == "f-string"


@pytest.fixture
def tracer(bootstrap: str, experiment: str) -> Iterator[KafkaTracer]:
    create_topics(make_admin(bootstrap), experiment)
    writer = EventWriter(bootstrap, experiment, AvroCodec(), producer_id="litagent-test")
    tracer = KafkaTracer(writer)
    yield tracer
    tracer.close()
    writer.close()


@pytest.mark.kafka
def test_returned_rewards_become_reward_spans_in_the_log(tracer: KafkaTracer, bootstrap: str,
                                                         experiment: str) -> None:
    """A float return is a reward span of the attempt; emitted rewards inside stay in the order they ended."""
    from agentlightning.emitter import find_final_reward as upstream_final_reward
    from agentlightning.types import Span as UpstreamSpan

    @rollout
    async def agent(task: dict[str, int], rollout: Rollout) -> float:
        emit_reward(0.1)  # an intermediate reward, emitted while running
        return 0.9

    async def run_attempt(agent: LitAgent[Any], aid: str, first: int) -> None:
        current = attempted(rid="ro-r", aid=aid)
        async with tracer.trace_context(current.rollout_id, current.attempt.attempt_id, first):
            result = await agent.execute({"q": 1}, RESOURCES, current)
            record_result(tracer, result)

    asyncio.run(run_attempt(agent, "at-1", 1))
    asyncio.run(run_attempt(SyncAgent(), "at-2", 3))  # returns 0.5 for q=1
    _, spans = read_spans(bootstrap, experiment, 3)
    assert [(s["attempt_id"], s["sequence_id"]) for s in spans] == [("at-1", 1), ("at-1", 2), ("at-2", 3)]
    first = [s for s in spans if s["attempt_id"] == "at-1"]
    assert find_final_reward([UpstreamSpan.model_validate(s) for s in first]) == 0.9
    assert upstream_final_reward([UpstreamSpan.model_validate(s) for s in spans]) == 0.5
    assert find_final_reward(tracer.get_last_trace()) == 0.5

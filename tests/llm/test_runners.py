"""Runner processes hand every rollout its own route on the proxy; its calls and rewards keep their order, and
their ends reach the store in the runners' batched finish calls."""

from __future__ import annotations

import pytest

from agl_events.bench.round_trips import read_requests
from agl_events.config import Settings
from agl_events.llm.fake_backend import render_chat, token_id, tokenize
from agl_events.llm.proxy import LLMProxy
from agl_events.llm.spans import CALL_SPAN
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.store import route_table as routes
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import EnqueueRolloutRequest
from tests.llm.agents import asking_agent
from tests.llm.conftest import MODEL

pytestmark = [pytest.mark.kafka, pytest.mark.asyncio(loop_scope="module")]


async def test_rollouts_on_runners_call_their_own_route_and_rewards_follow_their_calls(
        proxy: LLMProxy, store_server: tuple[KafkaLightningStore, str], llm_settings: Settings) -> None:
    from agentlightning.adapter import LlmProxyTraceToTriplet
    from agentlightning.types import Span as UpstreamSpan

    store, url = store_server
    await store.add_resources({"llm": proxy.as_resource(model=MODEL)})  # a ProxyLLM: one route per attempt
    pool = RunnerPool(RunnerConfig(settings=llm_settings, store_url=url, agent="x"), 1, agent=asking_agent)
    pool.start()
    try:
        before = await read_requests(url)
        queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"q": f"question {i}"})
                                                    for i in range(3)])
        ids = [r.rollout_id for r in queued]
        done = {r.rollout_id: r.status for r in await store.wait_for_rollouts(rollout_ids=ids, timeout=120)}
        assert done == dict.fromkeys(ids, "succeeded")
        calls = await read_requests(url) - before
        # A proxied rollout's end goes with the others' (POST /attempts/finish), not in a call of its own.
        assert not [route for route in calls if route.endswith(routes.UPDATE_ATTEMPT.path)]
        # The proxy checks an attempt with its first call's sequence id, not with a read of its own: one call per
        # span (the agent's 4 from its runner, each proxied call's from the proxy).
        assert not [route for route in calls if route.startswith("GET") and route.endswith(routes.QUERY_ATTEMPTS.path)]
        assert sum(n for route, n in calls.items() if route.endswith(routes.NEXT_SEQUENCE_ID.path)) == 6 * len(ids)
        assert 1 <= sum(n for route, n in calls.items() if route.endswith(routes.FINISH_ATTEMPTS.path)) <= len(ids)
        for i, rid in enumerate(ids):
            [attempt] = await store.query_attempts(rid)
            spans = list(await store.query_spans(rid))  # read at once: the finish waited for the proxy's spans
            assert {(s.rollout_id, s.attempt_id) for s in spans} == {(rid, attempt.attempt_id)}
            calls = sorted((s for s in spans if s.name == CALL_SPAN), key=lambda s: s.sequence_id)
            assert [c.attributes["gen_ai.prompt.0.content"] for c in calls] == [f"question {i}"] * 2
            think = next(s for s in spans if s.attributes.get("step") == "think")
            reward = spans[-1]
            assert calls[0].sequence_id < think.sequence_id < calls[1].sequence_id < reward.sequence_id

            triplets = LlmProxyTraceToTriplet().adapt([UpstreamSpan.model_validate(s.model_dump()) for s in spans])
            assert [t.reward for t in triplets] == [None, 1.0]  # the reward goes to the call just before it
            assert triplets[0].prompt["token_ids"] == [token_id(p) for p in tokenize(render_chat(
                [{"role": "user", "content": f"question {i}"}]))]
    finally:
        pool.stop(grace=10)


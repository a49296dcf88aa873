"""The whole data plane: a Trainer's algorithm starts the LLM proxy, runners call it, the samples worker
turns each finished rollout into a sample, and the algorithm gets them in whole groups with the token ids
and logprobs the backend sampled."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agl_events import Trainer
from agl_events.algorithm import AlgorithmContext, SplitResult
from agl_events.config import Settings
from agl_events.llm.fake_backend import FakeBackend, logprob, render_chat, token_id, tokenize
from agl_events.llm.proxy import LLMProxy
from agl_events.samples.batching import BatchPolicy
from agl_events.samples.model import Sample
from tests.llm.agents import asking_agent
from tests.llm.conftest import MODEL

pytestmark = pytest.mark.kafka


class ProxiedGroups:
    """What VERL or GRPO do first: serve the policy through the proxy, run groups, read their samples."""

    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.samples: list[Sample] = []

    async def run(self, ctx: AlgorithmContext, train: Sequence[Any], val: Sequence[Any] | None
                  ) -> dict[str, SplitResult]:
        assert ctx.store_url is not None and ctx.settings is not None
        models = [{"model_name": MODEL, "litellm_params": {"model": f"hosted_vllm/{self.backend.model}",
                                                           "api_base": self.backend.url}}]
        with LLMProxy(models, ctx.store_url, ctx.settings) as proxy:
            await ctx.publish_resources({"llm": proxy.as_resource(model=MODEL)})
            async with ctx.sample_stream(BatchPolicy(batch_size=len(train) * 2)) as stream:
                await ctx.enqueue_groups(train, group_size=2)
                batch = await stream.next_batch(timeout=180)
                assert batch is not None
                self.samples = batch.samples
                await stream.commit()
        return {}


def test_samples_carry_the_proxied_calls_token_ids_logprobs_and_rewards(
        llm_settings: Settings, backend_server: FakeBackend, tmp_path: Path) -> None:
    algorithm = ProxiedGroups(backend_server)
    # Upstream's default adapter, told the proxy's call span: it keeps logprobs too (LlmProxyTraceToTriplet
    # keeps token ids only; tests/llm/test_runners.py reads the same spans with it).
    trainer = Trainer(algorithm, n_runners=2, adapter={"llm_call_match": "litellm_request"}, settings=llm_settings,
                      view_dir=tmp_path / "view", progress=False)
    trainer.fit(asking_agent, [{"q": "question 0"}, {"q": "question 1"}])
    assert len(algorithm.samples) == 4 and {s.adapter for s in algorithm.samples} == {"TracerTraceToTriplet"}
    assert sorted(len([s for s in algorithm.samples if s.group_id == g])
                  for g in {s.group_id for s in algorithm.samples}) == [2, 2]
    for sample in algorithm.samples:
        assert sample.final_reward == 1.0 and sample.status == "succeeded"
        first, second = sample.triplets
        question = sample.input["q"]
        assert first.prompt["token_ids"] == [token_id(p) for p in tokenize(render_chat(
            [{"role": "user", "content": question}]))]
        reply = tokenize(f"Echo: {question}")
        assert first.response["token_ids"] == [token_id(p) for p in reply]
        assert first.response["logprobs"] == [logprob(p) for p in reply]  # per token, as sampled
        again = tokenize("Echo: again")  # the second call is streamed: token ids and logprobs kept all the same
        assert second.response["token_ids"] == [token_id(p) for p in again]
        assert second.response["logprobs"] == [logprob(p) for p in again]
        assert second.reward == 1.0 and first.reward is None  # the reward goes to the call just before it

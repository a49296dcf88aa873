"""The policy server answers as vLLM does (token ids, logprobs, streamed too), says which version sampled,
and the LLM proxy records its token ids and logprobs in the call's span."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from agl_events.config import Settings
from agl_events.llm.proxy import LLMProxy
from agl_events.llm.spans import CALL_SPAN
from agl_events.policy.server import PolicyServer
from agl_events.policy.weights import load_weights
from agl_events.store.kafka import KafkaLightningStore
from tests.llm.conftest import finished_spans
from tests.policy.conftest import write_version

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHAT = {"model": "policy", "messages": [{"role": "user", "content": "1 2 3 ="}], "return_token_ids": True,
        "logprobs": True, "top_logprobs": 2, "temperature": 1.0, "seed": 11}


def stream_chunks(server: PolicyServer, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", f"{server.url}{path}", json={**body, "stream": True}, timeout=10) as response:
        lines = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


async def test_chat_answers_carry_token_ids_and_the_logprobs_they_were_sampled_with(
        policy_server: PolicyServer, weights_dir: Path) -> None:
    answer = httpx.post(f"{policy_server.url}/chat/completions", json=CHAT, timeout=10).json()
    choice = answer["choices"][0]
    prompt, response = answer["prompt_token_ids"], choice["token_ids"]
    assert prompt == [1, 5, 6, 7, 14] and answer["model"] == "policy:v1"
    content = choice["logprobs"]["content"]
    assert len(content) == len(response) and all(len(c["top_logprobs"]) == 2 for c in content)
    assert choice["message"]["content"] == policy_server.tokenizer.decode(response, skip_special_tokens=True)
    recomputed = load_weights(write_version(weights_dir, 1)).sequence_logprobs([prompt], [response]).logprobs
    assert recomputed[0].tolist() == pytest.approx([c["logprob"] for c in content], abs=1e-5)

    streamed = stream_chunks(policy_server, "/chat/completions", CHAT)  # same seed: the same tokens
    assert streamed[0]["prompt_token_ids"] == prompt
    assert [t for c in streamed[1:] for t in c["choices"][0]["token_ids"]] == response
    assert [c["choices"][0]["logprobs"]["content"][0]["logprob"] for c in streamed[1:]] == \
        [c["logprob"] for c in content]


async def test_completions_answer_in_vllms_legacy_shape(policy_server: PolicyServer) -> None:
    body = {"model": "policy", "prompt": "1 2 3 =", "return_token_ids": True, "logprobs": 1, "seed": 4}
    choice = httpx.post(f"{policy_server.url}/completions", json=body, timeout=10).json()["choices"][0]
    assert choice["prompt_token_ids"] == [1, 5, 6, 7, 14]
    assert len(choice["logprobs"]["token_logprobs"]) == len(choice["token_ids"])
    streamed = stream_chunks(policy_server, "/completions", body)
    assert streamed[0]["choices"][0]["prompt_token_ids"] == [1, 5, 6, 7, 14]
    assert [t for c in streamed for t in c["choices"][0]["token_ids"]] == choice["token_ids"]
    assert "".join(c["choices"][0]["text"] for c in streamed) == choice["text"]
    models = httpx.get(f"{policy_server.url}/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["policy"]
    refused = httpx.post(f"{policy_server.url}/completions", json={**body, "model": "other"}, timeout=10)
    assert refused.status_code == 404


async def test_a_loaded_version_answers_the_next_request(policy_server: PolicyServer, weights_dir: Path) -> None:
    policy_server.load(write_version(weights_dir, 2), 2)
    try:
        answer = httpx.post(f"{policy_server.url}/chat/completions", json=CHAT, timeout=10).json()
        assert answer["model"] == "policy:v2" and policy_server.version == 2
        recomputed = load_weights(write_version(weights_dir, 2)).sequence_logprobs(
            [answer["prompt_token_ids"]], [answer["choices"][0]["token_ids"]]).logprobs
        assert recomputed[0].tolist() == pytest.approx(
            [c["logprob"] for c in answer["choices"][0]["logprobs"]["content"]], abs=1e-5)
    finally:
        policy_server.load(write_version(weights_dir, 1), 1)


@pytest.mark.kafka
async def test_the_proxy_records_the_policys_token_ids_logprobs_and_version(
        policy_server: PolicyServer, store_server: tuple[KafkaLightningStore, str], llm_settings: Settings) -> None:
    store, url = store_server
    models = [{"model_name": "policy",
               "litellm_params": {"model": "hosted_vllm/policy", "api_base": policy_server.url}}]
    with LLMProxy(models, url, llm_settings) as proxy:
        rollout = await store.start_rollout(input={"digits": [1, 2, 3]})
        llm = proxy.as_resource(rollout.rollout_id, rollout.attempt.attempt_id, "policy")
        async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0) as client:
            reply = await client.chat.completions.create(model="policy", temperature=1.0, seed=5,
                                                         messages=[{"role": "user", "content": "1 2 3 ="}])
        spans = await finished_spans(store, rollout)
    call = next(s for s in spans if s.name == CALL_SPAN)
    attrs = call.attributes
    assert attrs["prompt_token_ids"] == [1, 5, 6, 7, 14]
    response = list(attrs["response_token_ids"])
    assert response == reply.choices[0].token_ids  # type: ignore[attr-defined]
    assert attrs["gen_ai.response.model"] == "policy:v1"
    logprobs = [c["logprob"] for c in json.loads(str(attrs["logprobs.content"]))]
    assert len(logprobs) == len(response) and all(lp <= 0 for lp in logprobs)

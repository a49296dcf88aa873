"""Our proxy and Agent Lightning 0.3.0's own (LiteLLM) on the same requests to the same vLLM-shaped backend.

Upstream's proxy runs from its wheel in a process of its own (`tests.llm.upstream_proxy`), ours in this one;
both forward to the module's fake vLLM. For chat and completions, plain and streamed, on a `hosted_vllm/`
and an `openai/` deployment, the test compares what a client of upstream's proxy reads in the answers
(every field upstream's answer has, ours has too, with the same token ids) and every attribute of
upstream's `litellm_request` and `raw_gen_ai_request` spans with ours. Where the values must differ the
reason is written next to the exception. Upstream's adapter must read the same triplets from both.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import pytest_asyncio

from agl_events.config import Settings
from agl_events.llm.fake_backend import FakeBackend
from agl_events.llm.proxy import LLMProxy
from agl_events.llm.spans import CALL_SPAN, RAW_SPAN
from agl_events.store.kafka import KafkaLightningStore
from tests.llm.conftest import finished_spans

pytestmark = [pytest.mark.kafka, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
VLLM, SDK = "policy", "policy-sdk"  # the backend as hosted_vllm/ (LiteLLM's HTTP handler) and as openai/ (its SDK)
# What LiteLLM's proxy adds about itself (keys, budgets, costs, its own timings): nothing a proxy of ours has.
PROXY_INTERNALS = ("metadata.", "gen_ai.cost.", "hidden_params")
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is two plus two"}]


def requests_for(model: str) -> list[dict[str, Any]]:
    """Chat and completion, plain and streamed; logprobs asked by the agent, so both proxies send the same."""
    chat = {"model": model, "messages": MESSAGES, "max_tokens": 16, "temperature": 0.5, "logprobs": True}
    text = {"model": model, "prompt": "two plus two is", "max_tokens": 16, "logprobs": 1}
    return [{"path": "chat/completions", "body": {**chat, "stream": stream}} for stream in (False, True)] + [
        {"path": "completions", "body": {**text, "stream": stream}} for stream in (False, True)]


REQUESTS = requests_for(VLLM) + requests_for(SDK)


@pytest.fixture(scope="module")
def parity_models(backend_server: FakeBackend) -> list[dict[str, Any]]:
    base = {"api_base": backend_server.url, "api_key": "unused"}
    return [{"model_name": VLLM, "litellm_params": {"model": f"hosted_vllm/{backend_server.model}", **base}},
            {"model_name": SDK, "litellm_params": {"model": f"openai/{backend_server.model}", **base}}]


@pytest.fixture(scope="module")
def upstream(parity_models: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Upstream's answers and spans, one entry per request of REQUESTS."""
    job, out = json.dumps({"model_list": parity_models, "requests": REQUESTS}), tmp_path_factory.mktemp("up") / "r"
    done = subprocess.run([sys.executable, "-m", "tests.llm.upstream_proxy", str(out)], input=job,
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    results: list[dict[str, Any]] = json.loads(out.read_text())
    return results


@pytest.fixture(scope="module")
def parity_proxy(store_server: tuple[KafkaLightningStore, str], parity_models: list[dict[str, Any]],
                 llm_settings: Settings) -> Iterator[LLMProxy]:
    with LLMProxy(parity_models, store_server[1], llm_settings) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ours(parity_proxy: LLMProxy, store: KafkaLightningStore) -> list[dict[str, Any]]:
    """Our answers and spans for the same requests, in upstream's result shape."""
    results = []
    async with httpx.AsyncClient(timeout=60) as http:
        for request in REQUESTS:
            rollout = await store.start_rollout(input={})
            base = parity_proxy.as_resource(rollout.rollout_id, rollout.attempt.attempt_id,
                                            request["body"]["model"]).endpoint
            answer = await http.post(f"{base}/{request['path']}", json=request["body"])
            spans = await finished_spans(store, rollout)
            results.append({"status": answer.status_code, "text": answer.text,
                            "spans": [s.model_dump(mode="json") for s in spans]})
    return results


def answer_chunks(text: str) -> list[dict[str, Any]]:
    """A whole answer as one chunk, a streamed one as its chunks."""
    if not text.startswith("data:"):
        return [orjson.loads(text)]
    return [orjson.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and "[DONE]" not in line]


def paths(value: Any, prefix: str = "") -> set[str]:
    """Every field path in an answer (`choices.provider_specific_fields.token_ids`, list positions folded);
    a null field counts as absent, as a client reads both as None."""
    if isinstance(value, dict):
        return {p for k, v in value.items() if v is not None for p in {f"{prefix}{k}"} | paths(v, f"{prefix}{k}.")}
    if isinstance(value, list):
        return {p for item in value for p in paths(item, prefix)}
    return set()


def span_attributes(result: dict[str, Any], name: str) -> dict[str, Any]:
    [span] = [s for s in result["spans"] if s["name"] == name]
    return {k: v for k, v in span["attributes"].items() if not k.startswith(PROXY_INTERNALS)}


def case(index: int) -> str:
    body = REQUESTS[index]["body"]
    return f"{body['model']} {REQUESTS[index]['path']} {'streamed' if body['stream'] else 'plain'}"


CASES = list(range(len(REQUESTS)))
STREAMED_COMPLETION_USAGE = {"usage", "usage.completion_tokens", "usage.prompt_tokens", "usage.total_tokens"}


@pytest.mark.parametrize("index", CASES, ids=case)
async def test_a_client_of_upstreams_proxy_finds_every_field_it_reads_in_our_answers(
        upstream: list[dict[str, Any]], ours: list[dict[str, Any]], index: int) -> None:
    theirs, mine = upstream[index], ours[index]
    assert (theirs["status"], mine["status"]) == (200, 200), (theirs["text"][:500], mine["text"][:500])
    their_chunks, my_chunks = answer_chunks(theirs["text"]), answer_chunks(mine["text"])
    missing = set().union(*map(paths, their_chunks)) - set().union(*map(paths, my_chunks))
    if REQUESTS[index]["path"] == "completions" and REQUESTS[index]["body"]["stream"]:
        missing -= STREAMED_COMPLETION_USAGE  # LiteLLM puts a zero usage on every chunk; we relay vLLM's chunks
    assert not missing, f"fields upstream's answer has and ours lacks: {sorted(missing)}"
    if REQUESTS[index]["body"]["stream"]:
        return  # upstream's chunks carry no token ids (a chat is answered whole, then cut into chunks)
    [their_answer], [my_answer] = their_chunks, my_chunks
    chat = REQUESTS[index]["path"] == "chat/completions"
    at = ("prompt_token_ids", "choices.0.provider_specific_fields.token_ids") if chat else (
        "choices.0.prompt_token_ids", "choices.0.token_ids")
    for where in at:
        assert field(their_answer, where), where
        assert field(my_answer, where) == field(their_answer, where), where
    if chat:  # vLLM's own field is kept next to LiteLLM's
        assert field(my_answer, "choices.0.token_ids") == field(their_answer, at[1])


def field(answer: dict[str, Any], where: str) -> Any:
    value: Any = answer
    for key in where.split("."):
        if isinstance(value, list):
            value = value[int(key)] if int(key) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(key)
    return value


# Values that differ by nature (ids, clocks) or on purpose, per attribute; each with why.
CALL_VALUE_EXCEPTIONS = {
    "gen_ai.response.id": "each proxy's call got its own answer id from the backend",
    "litellm.call_id": "a fresh id per call",
    "gen_ai.response.model": "LiteLLM's proxy writes the model group; ours the model the backend answered "
                             "with (the policy server names the weights version there)",
}
STREAMED_CALL_VALUE_EXCEPTIONS = {
    "llm.is_streaming": "upstream asks the backend unstreamed and replays the answer as chunks; ours streams",
    "gen_ai.usage.input_tokens": "LiteLLM's completion stream reports 0; ours counts the token ids",
    "gen_ai.usage.output_tokens": "as above", "gen_ai.usage.total_tokens": "as above",
}
COMPLETION_VALUE_EXCEPTIONS = {
    "gen_ai.output.messages": "LiteLLM reads a text completion's choice as a chat message: role user, no text",
}


@pytest.mark.parametrize("index", CASES, ids=case)
async def test_our_litellm_request_span_has_every_attribute_of_upstreams(
        upstream: list[dict[str, Any]], ours: list[dict[str, Any]], index: int) -> None:
    theirs, mine = span_attributes(upstream[index], CALL_SPAN), span_attributes(ours[index], CALL_SPAN)
    assert not theirs.keys() - mine.keys(), f"missing on ours: {sorted(theirs.keys() - mine.keys())}"
    exceptions = dict(CALL_VALUE_EXCEPTIONS)
    if REQUESTS[index]["body"]["stream"]:
        exceptions.update(STREAMED_CALL_VALUE_EXCEPTIONS)
    if REQUESTS[index]["path"] == "completions":
        exceptions.update(COMPLETION_VALUE_EXCEPTIONS)
    differing = {k: (theirs[k], mine[k]) for k in theirs if k not in exceptions and theirs[k] != mine[k]}
    assert not differing, differing


@pytest.mark.parametrize("index", [i for i in CASES if REQUESTS[i]["path"] == "chat/completions"], ids=case)
async def test_our_raw_span_has_every_attribute_of_upstreams(
        upstream: list[dict[str, Any]], ours: list[dict[str, Any]], index: int) -> None:
    """Upstream's proxy leaves no raw span for text completions (LiteLLM's OpenTelemetry makes none there).
    Values are compared as the Python literals they hold (the OpenAI SDK orders a dict's keys its own way)."""
    theirs, mine = span_attributes(upstream[index], RAW_SPAN), span_attributes(ours[index], RAW_SPAN)
    prefix = next(iter(theirs)).rsplit(".", 1)[0]
    if REQUESTS[index]["body"]["stream"]:  # upstream asked unstreamed: only the token ids must agree
        missing = theirs.keys() - mine.keys() - {f"{prefix}.usage"}  # a stream has usage if the agent asks it
        assert not missing, f"missing on ours: {sorted(missing)}"
        for key in (f"{prefix}.prompt_token_ids", f"{prefix}.extra_body", f"{prefix}.return_token_ids"):
            assert mine.get(key) == theirs.get(key), key
        assert token_ids(mine[f"{prefix}.choices"]) == token_ids(theirs[f"{prefix}.choices"])
        return
    assert not theirs.keys() - mine.keys(), f"missing on ours: {sorted(theirs.keys() - mine.keys())}"
    per_call = {f"{prefix}.{k}" for k in ("id", "created")}
    differing = {k: (theirs[k], mine[k]) for k in theirs
                 if k not in per_call and literal(theirs[k]) != literal(mine[k])}
    assert not differing, differing


def literal(value: Any) -> Any:
    try:
        return ast.literal_eval(value) if isinstance(value, str) else value
    except (ValueError, SyntaxError):
        return value


def token_ids(choices: str) -> list[Any]:
    return [choice.get("token_ids") for choice in ast.literal_eval(choices)]


async def test_upstreams_adapter_reads_the_same_triplets_from_both(
        upstream: list[dict[str, Any]], ours: list[dict[str, Any]]) -> None:
    from agentlightning.adapter import LlmProxyTraceToTriplet
    from agentlightning.types import Span as UpstreamSpan

    def triplets(results: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
        made = []
        for index, result in enumerate(results):
            body = REQUESTS[index]["body"]
            if body["model"] != VLLM or REQUESTS[index]["path"] != "chat/completions" or body["stream"]:
                continue  # upstream's spans hold token ids it reads for hosted_vllm's whole chat answers only
            spans = [UpstreamSpan.model_validate(s) for s in result["spans"]]
            made += [(t.prompt["token_ids"], t.response["token_ids"]) for t in LlmProxyTraceToTriplet().adapt(spans)]
        return made

    expected = triplets(upstream)
    assert expected and all(prompt and response for prompt, response in expected)
    assert triplets(ours) == expected

"""The LLM proxy between a real store on the broker and a fake vLLM-like backend, driven by the OpenAI SDK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
import pytest

from agl_events.llm.fake_backend import BackendFailure, FakeBackend, logprob, render_chat, token_id, tokenize
from agl_events.llm.proxy import LLMProxy
from agl_events.llm.spans import CALL_SPAN, RAW_SPAN
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import AttemptedRollout, Span
from tests.eventually import eventually_async
from tests.llm.conftest import MODEL, finished_spans

# The store of the module lives on the module's loop.
pytestmark = [pytest.mark.kafka, pytest.mark.asyncio(loop_scope="module")]

ClientFor = Callable[[AttemptedRollout], openai.AsyncOpenAI]


def ids(text: str) -> list[int]:
    return [token_id(piece) for piece in tokenize(text)]


@pytest.fixture
async def clients() -> AsyncIterator[list[openai.AsyncOpenAI]]:
    made: list[openai.AsyncOpenAI] = []
    yield made
    for client in made:
        await client.close()


@pytest.fixture
def client_for(proxy: LLMProxy, clients: list[openai.AsyncOpenAI]) -> ClientFor:
    """An OpenAI client on the route of a rollout's attempt, as an agent given `as_resource(...)` makes one."""
    def make(rollout: AttemptedRollout) -> openai.AsyncOpenAI:
        llm = proxy.as_resource(rollout.rollout_id, rollout.attempt.attempt_id, MODEL)
        clients.append(openai.AsyncOpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0))
        return clients[-1]

    return make


async def call(client: openai.AsyncOpenAI, kind: str, text: str, *, stream: bool) -> str:
    """One call of `kind` ("chat" or "completion"); the reply text, gathered from the chunks when streamed."""
    if kind == "chat":
        messages: Any = [{"role": "user", "content": text}]
        if not stream:
            reply = await client.chat.completions.create(model=MODEL, messages=messages)
            return reply.choices[0].message.content or ""
        chunks = await client.chat.completions.create(model=MODEL, messages=messages, stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
    if not stream:
        return (await client.completions.create(model=MODEL, prompt=text)).choices[0].text
    chunks = await client.completions.create(model=MODEL, prompt=text, stream=True)
    return "".join([c.choices[0].text async for c in chunks if c.choices])


def by_name(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("kind", ["chat", "completion"])
async def test_a_call_is_answered_and_recorded_with_its_token_ids_and_logprobs(
        client_for: ClientFor, backend: FakeBackend, store: KafkaLightningStore, kind: str, stream: bool) -> None:
    rollout = await store.start_rollout(input={"task": 1})
    text = "what is two plus two"
    assert await call(client_for(rollout), kind, text, stream=stream) == f"Echo: {text}"

    asked = backend.requests[-1]
    assert asked["model"] == backend.model and asked["return_token_ids"] is True
    assert asked["logprobs"] == (True if kind == "chat" else 1)
    spans = await finished_spans(store, rollout)
    assert sorted(s.name for s in spans) == [CALL_SPAN, RAW_SPAN]
    request, raw = by_name(spans, CALL_SPAN)[0], by_name(spans, RAW_SPAN)[0]
    assert {(s.rollout_id, s.attempt_id, s.sequence_id) for s in spans} == {
        (rollout.rollout_id, rollout.attempt.attempt_id, 1)}
    assert raw.parent_id == request.span_id and raw.trace_id == request.trace_id
    assert request.status.status_code == "OK"

    prompt = render_chat([{"role": "user", "content": text}]) if kind == "chat" else text
    reply = tokenize(f"Echo: {text}")
    attrs = request.attributes
    assert attrs["prompt_token_ids"] == ids(prompt)
    assert attrs["response_token_ids"] == [token_id(p) for p in reply]
    content = json.loads(str(attrs["logprobs.content"]))
    assert [(c["token"], c["logprob"]) for c in content] == [(p, logprob(p)) for p in reply]
    assert attrs["llm.is_streaming"] == str(stream)
    assert attrs["gen_ai.prompt.0.content"] == text and attrs["gen_ai.completion.0.content"] == f"Echo: {text}"
    assert attrs["gen_ai.response.id"] == raw.attributes["llm.hosted_vllm.id"]
    assert raw.attributes["llm.hosted_vllm.prompt_token_ids" if kind == "chat" else "llm.hosted_vllm.choices"]


async def test_both_upstream_adapters_read_the_calls(client_for: ClientFor, store: KafkaLightningStore) -> None:
    from agentlightning.adapter import LlmProxyTraceToTriplet, TracerTraceToTriplet
    from agentlightning.types import Span as UpstreamSpan

    rollout = await store.start_rollout(input={"task": 2})
    client = client_for(rollout)
    await call(client, "chat", "first question", stream=False)
    await call(client, "chat", "second question", stream=True)
    spans = [UpstreamSpan.model_validate(s.model_dump()) for s in await finished_spans(store, rollout)]
    prompts = [ids(render_chat([{"role": "user", "content": q}])) for q in ("first question", "second question")]
    replies = [ids(f"Echo: {q}") for q in ("first question", "second question")]

    proxy_triplets = LlmProxyTraceToTriplet().adapt(spans)
    assert [(t.prompt["token_ids"], t.response["token_ids"]) for t in proxy_triplets] == list(zip(prompts, replies,
                                                                                                   strict=True))
    tracer_triplets = TracerTraceToTriplet(llm_call_match=CALL_SPAN).adapt(spans)
    assert sorted((t.prompt["token_ids"], t.response["token_ids"]) for t in tracer_triplets) == sorted(
        zip(prompts, replies, strict=True))
    for triplet in tracer_triplets:
        pieces = tokenize(triplet.response["raw_content"][0]["content"])
        assert [c["logprob"] for c in triplet.response["logprobs"]] == [logprob(p) for p in pieces]
        assert triplet.metadata["response_id"]


async def test_concurrent_calls_of_two_attempts_are_attributed_to_each(client_for: ClientFor,
                                                                       store: KafkaLightningStore) -> None:
    rollouts = [await store.start_rollout(input={"task": i}) for i in range(2)]
    await asyncio.gather(*(call(client_for(r), kind, f"rollout {i} call {j}", stream=j % 2 == 1)
                           for i, r in enumerate(rollouts) for j, kind in enumerate(["chat", "chat", "completion"])))
    for i, rollout in enumerate(rollouts):
        spans = await finished_spans(store, rollout)
        assert {(s.rollout_id, s.attempt_id) for s in spans} == {(rollout.rollout_id, rollout.attempt.attempt_id)}
        assert sorted(s.sequence_id for s in spans) == [1, 1, 2, 2, 3, 3]  # one reserved id per call
        contents = sorted(str(s.attributes["gen_ai.completion.0.content"]) for s in by_name(spans, CALL_SPAN))
        assert contents == [f"Echo: rollout {i} call {j}" for j in range(3)]


async def test_a_call_with_a_traceparent_nests_under_the_agents_span(proxy: LLMProxy,
                                                                     store: KafkaLightningStore) -> None:
    rollout = await store.start_rollout(input={})
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    route = proxy.as_resource(rollout.rollout_id, rollout.attempt.attempt_id, MODEL).endpoint
    async with httpx.AsyncClient() as http:
        answered = await http.post(f"{route}/chat/completions", headers={"traceparent": f"00-{trace_id}-{span_id}-01"},
                                   json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert answered.status_code == 200
    [request] = by_name(await finished_spans(store, rollout), CALL_SPAN)
    assert (request.trace_id, request.parent_id) == (trace_id, span_id)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_backend_error_reaches_the_agent_and_is_recorded_as_a_failed_call(
        proxy: LLMProxy, client_for: ClientFor, backend: FakeBackend, store: KafkaLightningStore,
        stream: bool) -> None:
    rollout = await store.start_rollout(input={})
    backend.failure = BackendFailure(status=503, message="the GPU is on fire")
    with pytest.raises(openai.APIStatusError) as raised:
        await call(client_for(rollout), "chat", "hello", stream=stream)
    assert raised.value.status_code == 503
    assert "the GPU is on fire" in raised.value.message and proxy.model_names[0] in raised.value.message
    [request] = by_name(await finished_spans(store, rollout), CALL_SPAN)
    assert request.status.status_code == "ERROR" and "the GPU is on fire" in (request.status.description or "")
    assert request.attributes["http.response.status_code"] == 503
    assert request.events[0].name == "exception"


async def test_a_stream_the_backend_breaks_off_fails_with_the_tokens_it_got(
        client_for: ClientFor, backend: FakeBackend, store: KafkaLightningStore) -> None:
    rollout = await store.start_rollout(input={})
    backend.failure = BackendFailure(status=500, message="engine died", after_tokens=2)
    with pytest.raises(openai.APIError, match="engine died"):
        await call(client_for(rollout), "chat", "one two three four", stream=True)
    [request] = by_name(await finished_spans(store, rollout), CALL_SPAN)
    assert request.status.status_code == "ERROR"
    assert request.attributes["response_token_ids"] == ids("Echo: one")  # the two tokens streamed before


async def test_an_agent_hanging_up_mid_stream_leaves_a_failed_call_with_what_it_got(
        client_for: ClientFor, backend: FakeBackend, store: KafkaLightningStore) -> None:
    rollout = await store.start_rollout(input={})
    backend.reply, backend.token_delay = " ".join(["word"] * 40), 0.05  # two seconds of tokens
    chunks = await client_for(rollout).chat.completions.create(model=MODEL, stream=True,
                                                              messages=[{"role": "user", "content": "talk"}])
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            break  # the first word: hang up
    await chunks.close()
    calls: list[Span] = []

    async def call_recorded() -> bool:
        """The proxy notices, then writes the call while nobody waits for it: wait for the call's span itself
        (a call's spans are one append, but a poll may fold part of it)."""
        calls[:] = by_name(list(await store.query_spans(rollout.rollout_id)), CALL_SPAN)
        return bool(calls)

    await eventually_async(call_recorded, "the proxy recorded the abandoned call")
    [request] = calls
    assert request.status.status_code == "ERROR" and request.attributes["error.type"] == "ClientDisconnected"
    assert 1 <= len(request.attributes["response_token_ids"]) < 40  # type: ignore[arg-type]


async def test_an_unreachable_backend_is_a_502_and_a_failed_call(client_for: ClientFor,
                                                                 store: KafkaLightningStore) -> None:
    rollout = await store.start_rollout(input={})
    with pytest.raises(openai.APIStatusError) as raised:
        await client_for(rollout).chat.completions.create(model="down", messages=[{"role": "user",
                                                                                          "content": "hi"}])
    assert raised.value.status_code == 502 and "cannot be reached" in raised.value.message
    [request] = by_name(await finished_spans(store, rollout), CALL_SPAN)
    assert request.status.status_code == "ERROR" and request.attributes["error.type"] == "BackendUnreachable"


async def test_requests_the_proxy_cannot_attribute_or_route_are_refused_clearly(
        proxy: LLMProxy, client_for: ClientFor, clients: list[openai.AsyncOpenAI], backend: FakeBackend,
        store: KafkaLightningStore) -> None:
    rollout = await store.start_rollout(input={})
    with pytest.raises(openai.NotFoundError, match=r"'gpt-5' is not in the proxy's model list.*policy, down"):
        await client_for(rollout).chat.completions.create(model="gpt-5", messages=[])
    clients.append(openai.AsyncOpenAI(base_url=proxy.as_resource("ro-nobody", "at-nobody", MODEL).endpoint,
                                      api_key="-", max_retries=0))
    with pytest.raises(openai.NotFoundError, match="rollout 'ro-nobody' has no attempt 'at-nobody'"):
        await clients[-1].chat.completions.create(model=MODEL, messages=[])
    async with httpx.AsyncClient(base_url=proxy.url) as http:
        unattributed = await http.post("/v1/chat/completions", json={"model": MODEL, "messages": []})
        assert unattributed.status_code == 404
        assert "/rollout/{rollout_id}/attempt/{attempt_id}/v1" in unattributed.json()["error"]["message"]
        route = f"/rollout/{rollout.rollout_id}/attempt/{rollout.attempt.attempt_id}"
        not_json = await http.post(f"{route}/v1/chat/completions", content=b"{nope")
        assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]["message"]
        listed = await http.get(f"{route}/v1/models")
        assert [m["id"] for m in listed.json()["data"]] == [MODEL, "down"]
    assert backend.requests == []  # nothing refused was forwarded
    assert await finished_spans(store, rollout) == []


async def test_as_resource_gives_the_proxy_llm_or_one_attempts_route(proxy: LLMProxy) -> None:
    shared = proxy.as_resource(model=MODEL, sampling_parameters={"temperature": 0.7})
    assert shared.resource_type == "proxy_llm" and shared.endpoint == f"{proxy.url}/v1"
    assert shared.get_base_url("ro-1", "at-1") == f"{proxy.url}/rollout/ro-1/attempt/at-1/v1"
    one = proxy.as_resource("ro-1", "at-1", model=MODEL)
    assert (one.resource_type, one.endpoint) == ("llm", f"{proxy.url}/rollout/ro-1/attempt/at-1/v1")
    with pytest.raises(ValueError, match="several models"):
        proxy.as_resource()
    with pytest.raises(ValueError, match="both"):
        proxy.as_resource("ro-1", None, model=MODEL)


def proxy_metrics(proxy: LLMProxy) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{proxy.url}/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def test_metrics_count_calls_by_status_time_them_and_add_up_tokens(
        proxy: LLMProxy, client_for: ClientFor, backend: FakeBackend, store: KafkaLightningStore) -> None:
    model = proxy.model_names[0]
    before = await asyncio.to_thread(proxy_metrics, proxy)
    await call(client_for(await store.start_rollout(input={})), "chat", "two words", stream=False)
    backend.failure = BackendFailure(status=503, message="down")
    with pytest.raises(openai.APIStatusError):
        await call(client_for(await store.start_rollout(input={})), "chat", "hello", stream=False)
    after = await asyncio.to_thread(proxy_metrics, proxy)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted({"model": model, **labels}.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert grew("agl_proxy_calls_total", status="200") == 1 and grew("agl_proxy_calls_total", status="503") == 1
    assert grew("agl_proxy_call_duration_seconds_count", stage="backend") == 2
    assert grew("agl_proxy_call_duration_seconds_count", stage="total") == 2
    assert grew("agl_proxy_call_duration_seconds_sum", stage="total") >= grew(
        "agl_proxy_call_duration_seconds_sum", stage="backend") > 0
    assert grew("agl_proxy_tokens_total", kind="prompt") > 0 and grew("agl_proxy_tokens_total", kind="completion") > 0

"""Records the span fixtures in spans/: real agent runs, traced by us and by upstream, against a fake vLLM.

The adapter tests compare our adapters with upstream's on these files, so the spans must be what real
tracing writes, not what we think it writes: ours come from the KafkaTracer (read back from the log, as
the store serves them), upstream's from Agent Lightning 0.3.0's AgentOps tracer (openai instrumented, its
token-id patch applied), its emitters, and its LLM proxy (LiteLLM) with upstream's InMemoryLightningStore.
The model is a vLLM-shaped HTTP server on loopback that returns token ids, logprobs and tool calls.

    PYTHONPATH=. AGL_KAFKA_BOOTSTRAP=localhost:29092 python -m tests.adapter.record_spans [NAME ...]

Only the `ours_*` recordings need the broker. Each recording runs in a process of its own: upstream's
tracers install a global TracerProvider, which OpenTelemetry allows once per process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry import trace

from agl_events.config import Settings
from agl_events.emitter import emit_reward, operation
from agl_events.emitter.attributes import flatten_attributes
from agl_events.emitter.spans import get_otel_tracer
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics, delete_topics
from agl_events.log.clients import make_admin
from agl_events.log.writer import EventWriter
from agl_events.semconv import AGL_REWARD
from agl_events.tracer import KafkaTracer
from agl_events.types import Span
from tests.agent import read_spans

SPANS_DIR = Path(__file__).parent / "spans"
LEGACY_MODEL = "tiny-legacy"  # answered the way older vLLM did: top-level response_token_ids, per choice
RETRIED = "(retried)"  # a prompt ending so always gets the same response id

CALCULATOR = {"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}


# -- the model -------------------------------------------------------------------------------------
def token_ids(text: str) -> list[int]:
    return [zlib.crc32(word.encode()) % 50_000 for word in text.split()] or [0]


class FakeVllm(BaseHTTPRequestHandler):
    """OpenAI chat completions as vLLM answers them with return_token_ids and logprobs.

    A prompt ending in RETRIED gets a response id derived from the prompt, so asking twice reproduces a
    response reported twice. With tools offered and no tool result yet, the answer is a call of the first.
    """

    calls = 0

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        FakeVllm.calls += 1
        messages = body["messages"]
        prompt = " ".join(str(m.get("content") or "") for m in messages)
        message: dict[str, Any] = {"role": "assistant", "content": f"answer {FakeVllm.calls} to {prompt[-12:]}"}
        if body.get("tools") and messages[-1]["role"] != "tool":
            tool = body["tools"][0]["function"]["name"]
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call-{FakeVllm.calls}", "type": "function",
                "function": {"name": tool, "arguments": json.dumps({"a": 2, "b": 2})}}]}
        completion_ids = token_ids(message["content"] or json.dumps(message["tool_calls"]))
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "stop"}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [
                {"token": str(t), "logprob": -0.25 * (i + 1), "bytes": list(str(t).encode()), "top_logprobs": []}
                for i, t in enumerate(completion_ids)]}
        response: dict[str, Any] = {
            "id": f"chatcmpl-{zlib.crc32(prompt.encode()):08x}" if prompt.endswith(RETRIED) else
                  f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"], "choices": [choice],
            "prompt_token_ids": token_ids(prompt),
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(completion_ids),
                      "total_tokens": len(prompt.split()) + len(completion_ids)}}
        if body["model"] == LEGACY_MODEL:
            response["response_token_ids"] = [completion_ids]
        else:
            choice["token_ids"] = completion_ids
        data = json.dumps(response).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def fake_vllm() -> Iterator[str]:
    """The base URL (…/v1) of a fake vLLM serving on loopback for the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def complete(base_url: str, **request: Any) -> dict[str, Any]:
    """One chat completion from the fake model, as the raw JSON vLLM returns (our side uses no OpenAI SDK)."""
    req = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(request).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as reply:
        return json.loads(reply.read())


# -- our side: LLM-call spans in each attribute convention upstream's adapters read ----------------
def gen_ai_attributes(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """What OpenTelemetry's openai instrumentation (AgentOps, OpenLLMetry) records, with upstream's token-id
    patch: gen_ai.* keys, `prompt_token_ids` / `response_token_ids`, and `logprobs.content` JSON."""
    choice = response["choices"][0]
    attributes: dict[str, Any] = {"gen_ai.system": "OpenAI", "gen_ai.request.model": request["model"],
                                  "gen_ai.response.id": response["id"], "gen_ai.response.model": response["model"]}
    for i, message in enumerate(request["messages"]):
        attributes.update(flatten_attributes({f"gen_ai.prompt.{i}": message}))
    for i, tool in enumerate(request.get("tools", [])):
        function = tool["function"]
        attributes.update({f"gen_ai.request.functions.{i}.name": function["name"],
                           f"gen_ai.request.functions.{i}.description": function["description"],
                           f"gen_ai.request.functions.{i}.parameters": json.dumps(function["parameters"])})
    message = choice["message"]
    attributes.update({"gen_ai.completion.0.role": message["role"], "gen_ai.completion.0.finish_reason": "stop"})
    if message["content"] is not None:
        attributes["gen_ai.completion.0.content"] = message["content"]
    for j, call in enumerate(message.get("tool_calls") or []):
        attributes.update({f"gen_ai.completion.0.tool_calls.{j}.id": call["id"],
                           f"gen_ai.completion.0.tool_calls.{j}.name": call["function"]["name"],
                           f"gen_ai.completion.0.tool_calls.{j}.arguments": call["function"]["arguments"]})
    attributes["prompt_token_ids"] = response["prompt_token_ids"]
    attributes["response_token_ids"] = choice.get("token_ids") or response["response_token_ids"][0]
    if "logprobs" in choice:
        attributes["logprobs.content"] = json.dumps(choice["logprobs"]["content"])
    return attributes


def weave_attributes(request: dict[str, Any], response: dict[str, Any], variant: str) -> dict[str, Any]:
    """What Weave records: the call's input and output flattened under agentlightning.operation.*; the
    response token ids sit where the vLLM/SDK version put them (`variant`)."""
    output = json.loads(json.dumps(response))
    choice = output["choices"][0]
    completion_ids = choice.pop("token_ids", None) or output.pop("response_token_ids")[0]
    if variant == "response_token_ids":  # older vLLM: [[...]] per choice, at the top
        output["response_token_ids"] = [completion_ids]
    elif variant == "choice_token_ids":  # newer vLLM
        choice["token_ids"] = completion_ids
    else:  # newer OpenAI SDK: vendor fields moved under provider_specific_fields
        choice["provider_specific_fields"] = {"token_ids": completion_ids}
    return flatten_attributes({"agentlightning.operation.input": request, "agentlightning.operation.output": output})


@contextmanager
def llm_span(base_url: str, style: str = "gen_ai", name: str = "openai.chat.completion",
             **request: Any) -> Iterator[dict[str, Any]]:
    """An LLM-call span (current for the block, so spans inside nest under it) around one model call."""
    with get_otel_tracer().start_as_current_span(name) as span:
        response = complete(base_url, **request)
        attributes = gen_ai_attributes(request, response) if style == "gen_ai" else weave_attributes(
            request, response, style)
        span.set_attributes(attributes)
        yield response


def tool_span(call: dict[str, Any], result: str) -> None:
    """A tool execution recorded the way AgentOps tool spans are read by TraceToMessages: `tool.*`."""
    with get_otel_tracer().start_as_current_span("tool.add") as span:
        span.set_attributes({"tool.name": call["function"]["name"], "tool.parameters": call["function"]["arguments"],
                             "tool.call.id": call["id"], "tool.call.type": call["type"], "tool.result": result})


def ask(question: str, system: str | None = None) -> list[dict[str, Any]]:
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]


def agents_run(base_url: str) -> None:
    """Two agents under a session span: tool use, every token-id convention, a wrapper that reports its inner
    request again (with and without a response id), an LLM judge inside an AGL 0.3 reward operation, and
    rewards at three depths (multi-dimensional at the end)."""
    otel = get_otel_tracer()
    with otel.start_as_current_span("agent.run"):
        with otel.start_as_current_span("planner", attributes={"agent.name": "planner"}):
            request = {"model": "tiny", "messages": ask("what is 2 + 2?", "use the tools"), "tools": [CALCULATOR],
                       "logprobs": True}
            with llm_span(base_url, **request) as response:
                call = response["choices"][0]["message"]["tool_calls"][0]
                tool_span(call, "4")
            messages = [*request["messages"], {"role": "assistant", "tool_calls": [
                {"id": call["id"], "name": call["function"]["name"], "arguments": call["function"]["arguments"]}]},
                {"role": "tool", "content": "4", "tool_call_id": call["id"]}]
            with llm_span(base_url, model="tiny", messages=messages, logprobs=True):
                pass
            emit_reward(0.25)
        with otel.start_as_current_span("solver", attributes={"agent.name": "solver"}):
            for variant in ("choice_token_ids", "response_token_ids", "provider_specific_fields"):
                with llm_span(base_url, style=variant, name="openai.chat.completions.create",
                              model="tiny", messages=ask(f"solve it ({variant})")):
                    pass
            wrapped = {"model": "tiny", "messages": ask("wrapped call")}
            with llm_span(base_url, **wrapped) as outer:
                inner = {k: v for k, v in gen_ai_attributes(wrapped, outer).items() if k != "gen_ai.response.id"}
                with otel.start_as_current_span("openai.chat.completion", attributes=inner):
                    pass  # the inner client's own span: no response id
                with otel.start_as_current_span("openai.chat.completion",
                                                attributes={**inner, "gen_ai.response.id": outer["id"]}):
                    pass  # the same response once more
            with operation(name=AGL_REWARD):
                with llm_span(base_url, model="tiny", messages=ask("judge the answer", "you are a judge")):
                    pass
                emit_reward(0.5)
        emit_reward({"task": 1.0, "style": 0.5}, primary_key="task")


def threads_run(base_url: str) -> None:
    """Calls made on worker threads, which carry no OpenTelemetry context: their spans are roots, enclosed in
    time by the agent span that waited for them (what repair_hierarchy re-parents); a helper outside."""
    otel = get_otel_tracer()

    def on_thread(fn: Callable[[], None]) -> None:
        worker = threading.Thread(target=fn)
        worker.start()
        worker.join()

    def call(question: str) -> Callable[[], None]:
        def run() -> None:
            with llm_span(base_url, model="tiny", messages=ask(question), logprobs=True):
                pass
        return run

    with otel.start_as_current_span("worker", attributes={"agent.name": "worker"}):
        on_thread(call("first step"))
        on_thread(call("second step"))
        on_thread(lambda: emit_reward(0.75))
    with (otel.start_as_current_span("helper", attributes={"agent.name": "helper"}),
          llm_span(base_url, model=LEGACY_MODEL, messages=ask("summarise"))):
        pass
    emit_reward(1.0)


def remote_parent_run(base_url: str) -> None:
    """An agent continuing a trace started elsewhere (its parent span is in another process, so missing
    here), and a reward emitted outside it: one virtual parent and two roots."""
    remote = trace.SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=True,
                               trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    with get_otel_tracer().start_as_current_span("agent", context=trace.set_span_in_context(
            trace.NonRecordingSpan(remote)), attributes={"agent.name": "remote"}):
        with llm_span(base_url, model="tiny", messages=ask("continue")):
            pass
        emit_reward(0.5)
        with llm_span(base_url, model="tiny", messages=ask("and again")):
            pass
    emit_reward(0.0)


def record_ours(run: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run under a KafkaTracer on the broker, then read the spans back from the log, as the store serves them."""
    bootstrap = Settings.from_env().bootstrap_servers
    experiment = f"record{uuid.uuid4().hex[:8]}"
    create_topics(make_admin(bootstrap), experiment)
    writer = EventWriter(bootstrap, experiment, AvroCodec(), producer_id="record-spans")
    tracer = KafkaTracer(writer)
    try:
        with fake_vllm() as base_url, tracer.trace_context("ro-recorded", "at-recorded", first_sequence_id=1):
            run(base_url)
        expected = len(tracer.get_last_trace())
        _, spans = read_spans(bootstrap, experiment, expected)
        assert len(spans) == expected, f"{len(spans)} of {expected} spans came back"
        return [Span.model_validate(span).model_dump(mode="json") for span in spans]
    finally:
        tracer.close()
        writer.close()
        delete_topics(make_admin(bootstrap), f"agl.{experiment}")


# -- upstream's side (imported where used: agentlightning takes seconds to import, ours_* runs skip it) --
async def _upstream_agentops(base_url: str) -> list[Any]:
    """Upstream's AgentOps tracer: openai calls instrumented (token ids, logprobs), AgentOps @agent spans,
    every reward format upstream reads (emit_reward, the deprecated @reward on AgentOps, the v0.2
    annotation), an operation reward with a judge inside, emit_message / emit_object."""
    import openai
    from agentlightning.emitter import emit_annotation, emit_message, emit_object, emit_reward, operation, reward
    from agentlightning.semconv import AGL_REWARD
    from agentlightning.store.memory import InMemoryLightningStore
    from agentlightning.tracer.agentops import AgentOpsTracer
    from agentops.sdk.decorators import agent

    store = InMemoryLightningStore()
    tracer = AgentOpsTracer()
    tracer.init_worker(0, store)
    rollout = await store.start_rollout(input={"question": "2 + 2"})
    client = openai.OpenAI(base_url=base_url, api_key="unused")

    @reward
    def graded(answer: str) -> float:
        return 0.5 if answer else 0.0

    @agent(name="researcher")
    class Researcher:
        def run(self) -> str:
            out = client.chat.completions.create(model="tiny", messages=ask("find facts", "be brief"), logprobs=True)
            emit_message("found facts")
            client.chat.completions.create(model=LEGACY_MODEL, messages=ask("more facts"))
            return out.choices[0].message.content or ""

    @agent(name="writer")
    class Writer:
        def run(self, facts: str) -> None:
            client.chat.completions.create(model="tiny", messages=ask(f"write up {facts}"), logprobs=True)
            graded(facts)
            with operation(name=AGL_REWARD):
                client.chat.completions.create(model="tiny", messages=ask("judge it", "you are a judge"))
                emit_reward(0.8)
            emit_object({"draft": 1})

    async with tracer.trace_context("agentops-run", rollout_id=rollout.rollout_id,
                                    attempt_id=rollout.attempt.attempt_id):
        facts = Researcher().run()
        emit_reward(0.1)
        Writer().run(facts)
        emit_annotation({"reward": 0.3})  # the v0.2 reward span
        emit_reward({"final": 1.0, "length": 0.2}, primary_key="final")
    spans = await store.query_spans(rollout.rollout_id)
    tracer.teardown_worker(0)
    return list(spans)


async def _upstream_proxy(base_url: str) -> list[Any]:
    """Upstream's LLM proxy (LiteLLM, hosted_vllm backend, return_token_ids hook) in front of the model, and the
    agent's rewards through upstream's OtelTracer into the same store, so sequence ids interleave."""
    import openai
    from agentlightning.emitter import emit_reward, operation
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.semconv import AGL_REWARD
    from agentlightning.store.memory import InMemoryLightningStore
    from agentlightning.tracer.otel import OtelTracer

    store = InMemoryLightningStore(thread_safe=True)
    backend = {"api_base": base_url}
    proxy = LLMProxy(model_list=[{"model_name": "tiny", "litellm_params": {"model": "hosted_vllm/tiny", **backend}},
                                 {"model_name": LEGACY_MODEL,
                                  "litellm_params": {"model": f"hosted_vllm/{LEGACY_MODEL}", **backend}}],
                     store=store, launch_mode="thread", host="127.0.0.1")
    tracer = OtelTracer()
    tracer.init_worker(0, store)  # first: it must own the global TracerProvider
    await proxy.start()
    rollout = await store.start_rollout(input={"question": "2 + 2"})
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    client = openai.AsyncOpenAI(base_url=proxy.as_resource(rid, aid, model="tiny").endpoint, api_key="unused")
    try:
        async with tracer.trace_context("proxy-run", rollout_id=rid, attempt_id=aid):
            await client.chat.completions.create(model="tiny", messages=ask("first"))
            await client.chat.completions.create(model=LEGACY_MODEL, messages=ask("second"))
            emit_reward(0.2)
            for _ in range(2):  # a retried request: the same response id twice
                await client.chat.completions.create(model="tiny", messages=ask(f"third {RETRIED}"))
            await client.chat.completions.create(model="tiny", messages=ask("fourth"))
            with operation(name=AGL_REWARD):
                emit_reward(0.9)
            emit_reward(1.0)
        await asyncio.sleep(1.0)  # the proxy's exporter hands spans to the store on its own thread
    finally:
        await proxy.stop()
        tracer.teardown_worker(0)
    return list(await store.query_spans(rid))


def record_upstream(run: Callable[[str], Any]) -> list[dict[str, Any]]:
    with fake_vllm() as base_url:
        spans = asyncio.run(run(base_url))
    return [span.model_dump(mode="json") for span in sorted(spans, key=lambda s: s.sequence_id)]


RECORDINGS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "ours_agents": lambda: record_ours(agents_run),
    "ours_threads": lambda: record_ours(threads_run),
    "ours_remote_parent": lambda: record_ours(remote_parent_run),
    "upstream_agentops": lambda: record_upstream(_upstream_agentops),
    "upstream_proxy": lambda: record_upstream(_upstream_proxy),
}


def main(names: list[str]) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no model price list download
    # upstream's proxy refuses to start without a master key; it serves on loopback for the recording only
    os.environ.setdefault("LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY", "true")
    if len(names) == 1:
        spans = RECORDINGS[names[0]]()
        SPANS_DIR.mkdir(exist_ok=True)
        (SPANS_DIR / f"{names[0]}.json").write_text(json.dumps(spans, indent=1, sort_keys=True) + "\n")
        print(f"{names[0]}: {len(spans)} spans")
        return
    for name in names or list(RECORDINGS):
        subprocess.run([sys.executable, "-m", "tests.adapter.record_spans", name], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])

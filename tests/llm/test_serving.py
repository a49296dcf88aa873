"""The proxy in a process of its own (`launch_mode="mp"`): it answers and records as the thread does, stops
cleanly, and does not outlive a parent that dies without stopping it. The rest of tests/llm runs it on a thread."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from agl_events.config import Settings
from agl_events.llm.fake_backend import FakeBackend
from agl_events.llm.proxy import LLMProxy
from agl_events.llm.spans import CALL_SPAN
from agl_events.store.kafka import KafkaLightningStore
from tests.eventually import eventually
from tests.llm.conftest import MODEL, finished_spans
from tests.orphans import orphan

#: A parent that starts a proxy process, says its port and whether it imported LiteLLM itself, and waits to be
#: killed.
ORPHANING_PARENT = """
import json, sys, threading
from agl_events.config import Settings
from agl_events.llm.proxy import LLMProxy
job = json.loads(sys.stdin.read())
proxy = LLMProxy(job["models"], job["store_url"], Settings.model_validate(job["settings"]), launch_mode="mp").start()
print(json.dumps({"port": proxy.port, "litellm": "litellm" in sys.modules}), flush=True)
threading.Event().wait()
"""


def refuses(port: int) -> bool:
    """Whether nothing listens on `port` on loopback any more."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture(scope="module")
def process_proxy(store_server: tuple[KafkaLightningStore, str], model_list: list[dict[str, Any]],
                  llm_settings: Settings) -> Iterator[LLMProxy]:
    with LLMProxy(model_list, store_server[1], llm_settings, launch_mode="mp") as running:
        yield running


def test_an_unknown_launch_mode_is_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="unknown launch mode 'asyncio': one of thread, mp"):
        LLMProxy([{"model_name": MODEL, "litellm_params": {"model": "hosted_vllm/x", "api_base": "http://x/v1"}}],
                 "http://127.0.0.1:1", Settings.from_env(), launch_mode="asyncio")  # type: ignore[arg-type]


def test_a_model_the_proxy_cannot_forward_to_fails_its_start() -> None:
    """Deployments are resolved where the proxy serves, as it starts (here a thread): not on the first call."""
    proxy = LLMProxy([{"model_name": MODEL, "litellm_params": {"model": "anthropic/claude-x"}}],
                     "http://127.0.0.1:1", Settings.from_env())
    assert proxy.model_names == [MODEL]
    with pytest.raises(ValueError, match="no OpenAI-compatible endpoint for provider 'anthropic'"):
        proxy.start()
    assert not proxy.is_running()


def test_an_empty_model_list_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="at least one model"):
        LLMProxy([], "http://127.0.0.1:1", Settings.from_env())


@pytest.mark.kafka
@pytest.mark.asyncio(loop_scope="module")
async def test_a_proxy_process_answers_records_and_stops(process_proxy: LLMProxy, backend: FakeBackend,
                                                         store: KafkaLightningStore) -> None:
    assert process_proxy.is_running()
    rollout = await store.start_rollout(input={"task": 1})
    llm = process_proxy.as_resource(rollout.rollout_id, rollout.attempt.attempt_id, MODEL)
    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0) as client:
        reply = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "Echo: hi"
    assert backend.requests[-1]["return_token_ids"] is True

    spans = await finished_spans(store, rollout)
    assert [s.name for s in spans if s.name == CALL_SPAN] == [CALL_SPAN]

    process_proxy.stop()
    assert not process_proxy.is_running()
    assert refuses(process_proxy.port or 0)


@pytest.mark.kafka
def test_a_proxy_process_does_not_outlive_its_parent(store_server: tuple[KafkaLightningStore, str],
                                                    model_list: list[dict[str, Any]], llm_settings: Settings) -> None:
    job = {"models": model_list, "store_url": store_server[1], "settings": llm_settings.model_dump(mode="json")}

    def serving(line: str) -> None:
        started = json.loads(line)
        assert not refuses(started["port"])
        assert started["litellm"] is False  # the child resolves the model list: a trainer's start skips ~3 s

    line, _ = orphan(ORPHANING_PARENT, json.dumps(job), serving)  # only the pipe's end tells the child
    port = json.loads(line)["port"]
    eventually(lambda: refuses(port), f"the orphaned proxy process stops listening on {port}", within=60)

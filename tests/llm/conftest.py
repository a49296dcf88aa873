"""Fixtures for the LLM proxy: a fake vLLM-like backend, a real store on the broker, the proxy between.

All three are real HTTP servers on loopback, started once per test module (each test works in rollouts of
its own, and gets the backend back in its default state). The proxy runs on its own thread and loop, the
store on the module's loop, so tests call the proxy with async clients and never block the loop meanwhile.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from agl_events.config import Settings
from agl_events.llm.fake_backend import FakeBackend
from agl_events.llm.proxy import LLMProxy
from agl_events.log.admin import delete_topics
from agl_events.log.clients import make_admin
from agl_events.proc.ports import free_port
from agl_events.server.embedded import embedded_store_server
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import AttemptedRollout, Span

MODEL = "policy"


@pytest.fixture(scope="module")
def llm_settings(bootstrap: str) -> Iterator[Settings]:
    """One experiment per module, its topics deleted afterwards."""
    name = f"t{uuid.uuid4().hex[:10]}"
    yield Settings.from_env(experiment=name, bootstrap=bootstrap)
    delete_topics(make_admin(bootstrap), f"agl.{name}")


@pytest.fixture(scope="module")
def backend_server() -> Iterator[FakeBackend]:
    with FakeBackend() as running:
        yield running


@pytest.fixture
def backend(backend_server: FakeBackend) -> FakeBackend:
    """The module's backend, answering normally and with no requests recorded yet."""
    backend_server.failure, backend_server.reply, backend_server.token_delay = None, None, 0.0
    backend_server.requests.clear()
    return backend_server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def store_server(llm_settings: Settings, tmp_path_factory: pytest.TempPathFactory
                       ) -> AsyncIterator[tuple[KafkaLightningStore, str]]:
    async with embedded_store_server(llm_settings, tmp_path_factory.mktemp("view")) as (store, url):
        yield store, url


@pytest.fixture(scope="module")
def store(store_server: tuple[KafkaLightningStore, str]) -> KafkaLightningStore:
    return store_server[0]


@pytest.fixture(scope="module")
def model_list(backend_server: FakeBackend) -> list[dict[str, Any]]:
    """`policy` on the fake backend, and `down` on a port nobody listens on."""
    return [{"model_name": MODEL, "litellm_params": {"model": f"hosted_vllm/{backend_server.model}",
                                                     "api_base": backend_server.url}},
            {"model_name": "down", "litellm_params": {"model": "hosted_vllm/gone",
                                                      "api_base": f"http://127.0.0.1:{free_port()}/v1"}}]


@pytest.fixture(scope="module")
def proxy(store_server: tuple[KafkaLightningStore, str], model_list: list[dict[str, Any]],
          llm_settings: Settings) -> Iterator[LLMProxy]:
    with LLMProxy(model_list, store_server[1], llm_settings) as running:
        yield running


async def finished_spans(store: KafkaLightningStore, rollout: AttemptedRollout) -> list[Span]:
    """End the attempt as a runner does (the store folds the span topic first), then read its spans."""
    await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
    return list(await store.query_spans(rollout.rollout_id))

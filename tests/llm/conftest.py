"""Fixtures for the LLM proxy: a fake vLLM-like backend, a real store on the broker, the proxy between.

All three are real HTTP servers on loopback. The proxy runs on its own thread and loop, the store on the
test's loop, so tests call the proxy with async clients and never block the loop while it works.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agl_events.config import Settings
from agl_events.llm.fake_backend import FakeBackend
from agl_events.llm.proxy import LLMProxy
from agl_events.server.embedded import embedded_store_server, free_port
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import AttemptedRollout, Span

MODEL = "policy"


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    with FakeBackend() as running:
        yield running


@pytest.fixture
async def store_server(settings: Settings, tmp_path: Path) -> AsyncIterator[tuple[KafkaLightningStore, str]]:
    async with embedded_store_server(settings, tmp_path / "view") as (store, url):
        yield store, url


@pytest.fixture
def store(store_server: tuple[KafkaLightningStore, str]) -> KafkaLightningStore:
    return store_server[0]


@pytest.fixture
def model_list(backend: FakeBackend) -> list[dict[str, Any]]:
    """`policy` on the fake backend, and `down` on a port nobody listens on."""
    return [{"model_name": MODEL, "litellm_params": {"model": f"hosted_vllm/{backend.model}", "api_base": backend.url}},
            {"model_name": "down", "litellm_params": {"model": "hosted_vllm/gone",
                                                      "api_base": f"http://127.0.0.1:{free_port()}/v1"}}]


@pytest.fixture
def proxy(store_server: tuple[KafkaLightningStore, str], model_list: list[dict[str, Any]],
          settings: Settings) -> Iterator[LLMProxy]:
    with LLMProxy(model_list, store_server[1], settings) as running:
        yield running


async def finished_spans(store: KafkaLightningStore, rollout: AttemptedRollout) -> list[Span]:
    """End the attempt as a runner does (the store folds the span topic first), then read its spans."""
    await store.update_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status="succeeded")
    return list(await store.query_spans(rollout.rollout_id))

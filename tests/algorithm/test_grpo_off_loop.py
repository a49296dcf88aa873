"""A step's weights files are written and read off the trainer's event loop.

That loop also serves the store the runners claim and finish rollouts on (`embedded_store_server`): a large
policy's weights and optimiser state take a good part of a second to write and to load, and in a pipelined
loop runners are working while the trainer does it, so doing it on the loop would stall every one of them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from agl_events.algorithm import grpo as grpo_module
from agl_events.algorithm.base import AlgorithmContext
from agl_events.algorithm.grpo import GRPO
from agl_events.config import Settings
from agl_events.llm.proxy import LLMProxy
from agl_events.policy import server as server_module
from agl_events.policy.model import Policy
from agl_events.policy.server import PolicyServer
from agl_events.types import LLM, NamedResources, ProxyLLM, ResourcesUpdate


class _Proxy:
    """What `_publish` asks of the LLM proxy: its resource."""

    def as_resource(self, model: str) -> LLM:
        return ProxyLLM(endpoint="http://127.0.0.1:9/v1", model=model)


class _Context:
    """What `_publish` asks of the algorithm context: to publish the resources."""

    async def publish_resources(self, resources: NamedResources) -> ResourcesUpdate:
        return ResourcesUpdate(resources_id="r1", create_time=0.0, update_time=0.0, version=1, resources=resources)


def _recording(threads: dict[str, int], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def record(*args: Any, **kwargs: Any) -> Any:
        threads[name] = threading.get_ident()
        return function(*args, **kwargs)

    return record


def test_weights_are_written_and_loaded_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    threads: dict[str, int] = {}
    for module, name, function in ((grpo_module, "save_weights", grpo_module.save_weights),
                                   (grpo_module, "save_optimizer", grpo_module.save_optimizer),
                                   (server_module, "load_weights", server_module.load_weights)):
        monkeypatch.setattr(module, name, _recording(threads, name, function))
    grpo = GRPO(steps=1)
    settings = Settings.from_env().model_copy(update={"home": tmp_path, "experiment": "off-loop"})
    policy = Policy(grpo.policy_config)
    optimizer = torch.optim.Adam(policy.parameters(), lr=grpo.lr)

    async def step() -> int:
        uri = await grpo._write_version(settings, policy, optimizer, 2)
        with PolicyServer(grpo.tokenizer) as server:
            await grpo._publish(cast(AlgorithmContext, _Context()), cast(LLMProxy, _Proxy()), server, uri, 2)
            assert server.version == 2
        return threading.get_ident()

    loop_thread = asyncio.run(step())
    assert set(threads) == {"save_weights", "save_optimizer", "load_weights"}
    assert loop_thread not in threads.values(), threads

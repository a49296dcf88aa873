"""GRPO's learner runs off the trainer's interpreter, and a version is loaded off its event loop.

That loop also serves the store the runners claim and finish rollouts on (`embedded_store_server`), and the
interpreter runs the LLM proxy and the policy server: a large policy's update held back by their use of the
GIL, or its files written and read on the loop, stalled the runners of a pipelined loop or the learner.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from agl_events.algorithm.base import AlgorithmContext
from agl_events.algorithm.grpo import GRPO
from agl_events.algorithm.grpo_learner import LearnerProcess, LearnerStart
from agl_events.algorithm.grpo_update import Tokens
from agl_events.config import Settings
from agl_events.llm.proxy import LLMProxy
from agl_events.policy import server as server_module
from agl_events.policy.model import Policy
from agl_events.policy.server import PolicyServer
from agl_events.policy.weights import load_weights, optimizer_path, save_version
from agl_events.samples.steps import StepRecord
from agl_events.types import LLM, NamedResources, ProxyLLM, ResourcesUpdate


class _Proxy:
    """What `_publish` asks of the LLM proxy: its resource."""

    def as_resource(self, model: str) -> LLM:
        return ProxyLLM(endpoint="http://127.0.0.1:9/v1", model=model)


class _Context:
    """What `_publish` asks of the algorithm context: to publish the resources."""

    async def publish_resources(self, resources: NamedResources) -> ResourcesUpdate:
        return ResourcesUpdate(resources_id="r1", create_time=0.0, update_time=0.0, version=1, resources=resources)


def _recording(threads: list[int], function: Callable[..., Any]) -> Callable[..., Any]:
    def record(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return function(*args, **kwargs)

    return record


def test_a_published_version_is_loaded_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    monkeypatch.setattr(server_module, "load_weights", _recording(threads, server_module.load_weights))
    grpo = GRPO(steps=1)
    policy = Policy(grpo.policy_config)
    uri = save_version(policy, torch.optim.Adam(policy.parameters()), tmp_path, "off-loop", 2)

    async def publish() -> int:
        with PolicyServer(grpo.tokenizer) as server:
            await grpo._publish(cast(AlgorithmContext, _Context()), cast(LLMProxy, _Proxy()), server, uri, 2)
            assert server.version == 2
        return threading.get_ident()

    loop_thread = asyncio.run(publish())
    assert threads and loop_thread not in threads


def _batch(prompt: list[int], response: list[int]) -> Tokens:
    return Tokens([prompt] * 4, [response] * 4, [[-1.5] * len(response)] * 4, [1.0, -1.0, 0.5, -0.5])


def test_the_learner_process_trains_as_the_trainer_would_and_reports_a_failed_step(tmp_path: Path) -> None:
    """Two steps in the learner process end at the weights (bit for bit) and optimiser state the same two
    steps give in this process; a step it cannot take raises here, with the learner's reason."""
    grpo = GRPO(steps=2, max_staleness=1, lr=1e-2)
    settings = Settings.from_env().model_copy(update={"home": tmp_path, "experiment": "learner"})
    policy = Policy(grpo.policy_config)
    optimizer = torch.optim.Adam(policy.parameters(), lr=grpo.lr)
    batches = [_batch([1, 5, 6, 7], [8, 9, 2]), _batch([1, 6, 5], [9, 2])]
    start = LearnerStart(grpo.policy_config, grpo.lr)
    with LearnerProcess(grpo._rule(), start, settings.home, settings.experiment) as learner:
        uris = [learner.step(tokens, version) for version, tokens in enumerate(batches, start=2)]  # no ready()
        started = learner.ready()  # the learner made the seeded weights and wrote them as v1
        assert (started.done, started.optimizer_restored) == (0, True)
        first = load_weights(started.weights_uri).state_dict()
        assert all(torch.equal(first[name], value) for name, value in policy.state_dict().items())
        with pytest.raises(RuntimeError, match="the learner failed at weights v4: ValueError: a sequence of"):
            learner.step(_batch([1] * 12, [2] * 6), 4)  # longer than the policy's max_len
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the learner process trains
    try:
        for tokens in batches:
            grpo._update(policy, optimizer, tokens)
    finally:
        torch.set_num_threads(threads)
    learned = load_weights(uris[-1]).state_dict()
    assert learned.keys() == policy.state_dict().keys()
    assert all(torch.equal(learned[name], value) for name, value in policy.state_dict().items())
    assert uris[-1].endswith("/learner/v3.pt")
    saved = torch.load(optimizer_path(tmp_path, "learner", 3), weights_only=True)
    assert saved["version"] == 3
    assert all(torch.equal(saved["state_dict"]["state"][i]["exp_avg"], state["exp_avg"])
               for i, state in optimizer.state_dict()["state"].items())


def test_a_learner_that_cannot_make_its_policy_says_why(tmp_path: Path) -> None:
    """A restarted trainer whose last step's weights are gone: the learner's start raises with its reason."""
    grpo = GRPO(steps=2)
    gone = StepRecord(step=3, version=5, weights_uri=(tmp_path / "v5.pt").as_uri(), time=0.0, trainer="t",
                      trained=[], dropped=[], offsets={})
    learner = LearnerProcess(grpo._rule(), LearnerStart(grpo.policy_config, grpo.lr, gone), tmp_path, "x").start()
    try:
        with pytest.raises(RuntimeError, match=r"the learner could not start: .*v5\.pt"):
            learner.ready()
    finally:
        learner.stop()

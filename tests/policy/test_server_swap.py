"""Swapping weights under a call in flight (pipelined GRPO loads each new version while runners sample):
the call finishes on the weights it started with and its answer names that version."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from agl_events.policy import server as server_module
from agl_events.policy.model import Policy
from agl_events.policy.server import PolicyServer
from agl_events.policy.tokenizer import make_tokenizer
from agl_events.policy.weights import load_weights
from tests.policy.conftest import write_version

CHAT = {"model": "policy", "messages": [{"role": "user", "content": "1 2 3 ="}], "return_token_ids": True,
        "logprobs": True, "temperature": 1.0, "seed": 3}


class _Gated:
    """A policy whose sampling waits, once started, until the test lets it go on."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.sampling, self.go_on = policy, threading.Event(), threading.Event()

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        self.sampling.set()
        assert self.go_on.wait(30), "the test never let the call go on"
        return self.policy.sample(*args, **kwargs)


def test_a_call_in_flight_finishes_on_the_weights_it_started_with(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    v1, v2 = write_version(tmp_path, 1), write_version(tmp_path, 2)
    gated = _Gated(load_weights(v1))
    monkeypatch.setattr(server_module, "load_weights", lambda uri: gated if uri == v1 else load_weights(uri))
    with PolicyServer(make_tokenizer()) as server, ThreadPoolExecutor(1) as pool:
        server.load(v1, 1)
        call = pool.submit(httpx.post, f"{server.url}/chat/completions", json=CHAT, timeout=60)
        assert gated.sampling.wait(30)
        server.load(v2, 2)  # a new version arrives while the call samples on v1
        gated.go_on.set()
        answer = call.result().json()
        after = httpx.post(f"{server.url}/chat/completions", json=CHAT, timeout=30).json()

    assert (answer["model"], after["model"], server.version) == ("policy:v1", "policy:v2", 2)
    for uri, reply in ((v1, answer), (v2, after)):  # each call's logprobs are its own version's
        recomputed = load_weights(uri).sequence_logprobs([reply["prompt_token_ids"]],
                                                         [reply["choices"][0]["token_ids"]]).logprobs
        assert recomputed[0].tolist() == pytest.approx(
            [c["logprob"] for c in reply["choices"][0]["logprobs"]["content"]], abs=1e-5)

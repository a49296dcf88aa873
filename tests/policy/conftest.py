"""The policy server on v1 weights, and the proxy's fixtures (a real store on the broker) for calls through it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agl_events.policy.model import Policy, PolicyConfig
from agl_events.policy.server import PolicyServer
from agl_events.policy.tokenizer import VOCAB, make_tokenizer
from agl_events.policy.weights import save_weights, weights_path
from tests.llm.conftest import llm_settings, store, store_server

__all__ = ["llm_settings", "store", "store_server"]


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


def write_version(home: Path, version: int) -> str:
    """Weights initialised from seed `version`, saved as that version."""
    return save_weights(Policy(PolicyConfig(vocab_size=len(VOCAB), seed=version)), weights_path(home, "exp", version))


@pytest.fixture(scope="module")
def policy_server(weights_dir: Path) -> Iterator[PolicyServer]:
    with PolicyServer(make_tokenizer()) as server:
        server.load(write_version(weights_dir, 1), 1)
        yield server

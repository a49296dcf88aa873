"""The registry tests' Schema Registry: Apicurio Registry (`broker.registry_server`), fetched with Maven on first
use, one per test module on a free loopback port, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agl_events.broker.registry_server import RegistryServer
from agl_events.proc.ports import free_port


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a fresh registry's Confluent API (in-memory storage: nothing from another module)."""
    server = RegistryServer(tmp_path_factory.mktemp("registry-home"), free_port())
    url = server.start()
    yield url
    server.stop()

"""The registry tests' Schema Registry: Apicurio Registry (`broker.registry_server`), fetched with Maven on first
use, one per test module on a free loopback port, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agl_events.broker.registry_server import RegistryServer
from agl_events.proc.ports import free_port


@pytest.fixture(scope="module")
def registry_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """A fresh registry (in-memory storage: nothing from another module), running."""
    server = RegistryServer(tmp_path_factory.mktemp("registry-home"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def registry_url(registry_server: RegistryServer) -> str:
    """Its Confluent API."""
    return registry_server.url

"""Fixtures for the REST server tests: a store backend, a real uvicorn server, and clients to drive it.

Only `store_factory` knows the backend: every test runs on our in-memory reference store and on the Kafka
store against the real broker. Tests look only at HTTP and JSON.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from agl_events.config import Settings
from agl_events.server.app import create_app
from agl_events.server.auth import AuthTokens
from agl_events.store.contract import LightningStore
from tests.eventually import eventually

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

StoreFor = Callable[[str], Awaitable[LightningStore]]


# --- backends: our in-memory reference and the Kafka store on the real broker ---------------------------------
@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFor:
    """`store_for(experiment)`: a fresh, empty store for each experiment the app opens.

    Kafka experiments get a per-test prefix, so `default` and `exp1` of one test never meet another's topics.
    """
    if request.param == "memory":
        from agl_events.store.memory import InMemoryLightningStore

        async def memory_store(experiment: str) -> LightningStore:
            return InMemoryLightningStore(scan_debounce_seconds=0)  # type: ignore[return-value]

        return memory_store
    from agl_events.store.kafka import KafkaLightningStore

    settings: Settings = request.getfixturevalue("settings")
    prefix = settings.experiment  # `<experiment>-<name>` topics are deleted with the experiment's

    async def kafka_store(experiment: str) -> LightningStore:
        scoped = settings.model_copy(update={"experiment": f"{prefix}-{experiment}"})
        return await KafkaLightningStore.open(  # type: ignore[return-value]
            scoped, view_dir=tmp_path / "views" / experiment, scan_debounce_seconds=0)

    return kafka_store


# --- a real server on a free port --------------------------------------------------------------------------
class _StoppableServer(uvicorn.Server):
    """uvicorn's server whose main loop ends the moment `stop()` is called, not at its next 0.1 s tick: a
    server starts and stops in most of the ~150 server tests, and the ticks alone were seconds of the fast tier."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stop = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._loop, self._stopped = asyncio.get_running_loop(), asyncio.Event()
        await self.on_tick(0)  # the date header, as uvicorn's own loop sets it first
        if not self._stop.is_set():
            await self._stopped.wait()

    def stop(self) -> None:
        """Thread-safe: the serving thread's loop is told, then uvicorn shuts down as it does on a signal."""
        self.should_exit = True
        self._stop.set()
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)


class RunningServer:
    """A uvicorn server in a background thread (its own event loop), so tests may block or await freely."""

    def __init__(self, store_for: StoreFor, auth: AuthTokens | None = None) -> None:
        self.app = create_app(store_for, auth=auth)
        # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say so, and without it
        # every keep-alive request pays a 40 ms Nagle / delayed-ACK stall.
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, timeout_keep_alive=30)
        self.server = _StoppableServer(config)
        self.thread = threading.Thread(target=self._run, name="uvicorn-test", daemon=True)

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def start(self) -> None:
        self.thread.start()
        eventually(self._started, "uvicorn started", within=10)

    def _started(self) -> bool:
        if not self.thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        return self.server.started

    def stop(self) -> None:
        self.server.stop()
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture
def start_server() -> Iterator[Callable[[StoreFor], RunningServer]]:
    """Start extra servers over any `store_for` (e.g. a failing one); all are stopped at teardown."""
    started: list[RunningServer] = []

    def start(store_for: StoreFor) -> RunningServer:
        running = RunningServer(store_for)
        running.start()
        started.append(running)
        return running

    try:
        yield start
    finally:
        for running in started:
            running.stop()


@pytest.fixture
def server(start_server: Callable[[StoreFor], RunningServer], store_factory: StoreFor) -> RunningServer:
    return start_server(store_factory)


@pytest.fixture
def base_url(server: RunningServer) -> str:
    return server.url


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    """A plain synchronous HTTP client for raw status-code and JSON checks."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        yield client


@pytest.fixture
async def client(base_url: str) -> AsyncIterator[Any]:
    """Upstream's real `LightningStoreClient`, unchanged, with short retry delays to keep tests fast."""
    from agentlightning.store.client_server import LightningStoreClient

    store_client = LightningStoreClient(base_url, retry_delays=(0.05,), health_retry_delays=(0.05,))
    try:
        yield store_client
    finally:
        await store_client.close()


@pytest.fixture
async def client_for(base_url: str) -> AsyncIterator[Callable[..., Any]]:
    """Build more upstream clients (e.g. one per experiment prefix); all are closed at teardown."""
    from agentlightning.store.client_server import LightningStoreClient

    made: list[Any] = []

    def make(path: str = "", **kwargs: Any) -> Any:
        kwargs.setdefault("retry_delays", (0.05,))
        kwargs.setdefault("health_retry_delays", (0.05,))
        made.append(LightningStoreClient(base_url + path, **kwargs))
        return made[-1]

    try:
        yield make
    finally:
        for store_client in made:
            await store_client.close()

"""A store and its HTTP server inside the calling event loop: for the Trainer, tests and benchmarks.

The caller uses the store object directly (no HTTP in the way) while runner processes reach the same
store over HTTP, and both share one event loop, so no call ever crosses threads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from agl_events.algorithm.metrics import TrainerMetrics
from agl_events.config import Settings
from agl_events.proc.ports import free_port
from agl_events.server.app import create_app, server_for
from agl_events.server.auth import AuthTokens
from agl_events.server.client import experiment_url
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.service import EventSourcedStore

S = TypeVar("S", bound=EventSourcedStore)


@asynccontextmanager
async def embedded_store_server(settings: Settings, view_dir: Path, *, host: str = "127.0.0.1",
                                port: int | None = None, scan_debounce_seconds: float = 10.0,
                                trainer: TrainerMetrics | None = None
                                ) -> AsyncIterator[tuple[KafkaLightningStore, str]]:
    """Yield (store, URL of its experiment on the server); both are closed on exit. With `settings.auth_token`
    set the server asks for it (the Trainer's runners and proxy send it from the same settings). `trainer`'s
    figures are served with the store's (`/metrics`, `/ui`)."""
    store = await KafkaLightningStore.open(settings, view_dir=view_dir, scan_debounce_seconds=scan_debounce_seconds)
    async with serving(store, settings.experiment, host=host, port=port, auth=AuthTokens(settings.store_token),
                       trainer=trainer) as url:
        yield store, url


@asynccontextmanager
async def serving(store: S, experiment: str, *, host: str = "127.0.0.1", port: int | None = None,
                  auth: AuthTokens | None = None, trainer: TrainerMetrics | None = None) -> AsyncIterator[str]:
    """Serve `store` as `experiment` over HTTP in this event loop; yield its URL. Closes the store on exit."""
    async def store_for(name: str) -> S:
        if name != experiment:
            raise ValueError(f"this server serves experiment {experiment!r} only")
        return store

    port = port or free_port(host)
    app = create_app(store_for, experiment, auth=auth, trainer=trainer)
    await app.state.experiments.get(experiment)  # opened now, not on the first request: figures from the start
    server = server_for(app, host, port, log_level="warning")
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]  # the host program owns signals
    served = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if served.done():
                served.result()  # raises why it could not start (port taken...)
            await asyncio.sleep(0.02)
        yield experiment_url(f"http://{host}:{port}", experiment)
    finally:
        server.should_exit = True
        await asyncio.gather(served, return_exceptions=True)
        await store.close()

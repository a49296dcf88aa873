"""The REST server: Agent Lightning's store API for many experiments in one process.

The default experiment is served at the root (`/v1/agl/...`, `/v1/traces`), exactly where upstream's server
has it, and every experiment also under `/experiments/<name>` (`/experiments/exp1/v1/agl/...`), so
`LightningStoreClient("http://host:4747/experiments/exp1")` works unchanged: the client only appends paths.
Each experiment gets its own store from `store_for(name)`, created on first use and cached.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import uvicorn
from fastapi import Depends, FastAPI, Path, Request

from agl_events.algorithm.metrics import TrainerMetrics
from agl_events.server.auth import AuthMiddleware, AuthTokens
from agl_events.server.errors import StoreErrorMiddleware
from agl_events.server.experiment_prefix import ExperimentPrefixMiddleware
from agl_events.server.experiments import EXPERIMENT_PREFIX, ExperimentStores, StoreFactory
from agl_events.server.forwarded import ForwardedMiddleware
from agl_events.server.limits import MAX_BODY_BYTES, BodyLimitMiddleware
from agl_events.server.metrics import (
    BackpressureCollector,
    HttpMetrics,
    MetricsMiddleware,
    StoreHealthCollector,
    create_metrics_router,
)
from agl_events.server.otlp import create_otlp_router
from agl_events.server.routes import create_agl_router
from agl_events.server.store_figures import StoreFigures
from agl_events.server.ui import create_ui_router
from agl_events.store.contract import LightningStore

DEFAULT_PORT = 4747
EXPERIMENT_DESCRIPTION = ("The experiment: a letter or digit, then letters, digits, '_' and '-' (at most 100 "
                          "characters); any other name is a 404")
#: Seconds a shutdown waits for requests still running after long polls were answered (a command waiting
#: for Kafka acknowledgements while the broker is gone); then uvicorn cancels them.
GRACEFUL_SHUTDOWN_SECONDS = 5

logger = logging.getLogger("agl_events.server")


def create_app(
    store_for: StoreFactory, default_experiment: str = "default", *, metrics: HttpMetrics | None = None,
    auth: AuthTokens | None = None, max_body_bytes: int = MAX_BODY_BYTES, trainer: TrainerMetrics | None = None,
) -> FastAPI:
    """Build the app. `store_for(name)` is awaited once per experiment, on that experiment's first request.

    `metrics` lets a caller share a Prometheus registry; by default the app gets a fresh one (with process
    collectors), served at `/metrics`. Stores with a `close()` are closed when the app shuts down. `auth`
    asks for bearer tokens (`server.auth`); without it every route is open. A request body over
    `max_body_bytes` is a 413 before it is read (`server.limits`). Each experiment's figures (`server.store_figures`)
    are in `/metrics` and on `/ui`, with `trainer`'s if a trainer runs in this process.
    """
    experiments = ExperimentStores(store_for, default_experiment)
    metrics = metrics or HttpMetrics.with_default_collectors()
    metrics.registry.register(StoreHealthCollector(experiments))
    metrics.registry.register(BackpressureCollector(experiments))
    figures = StoreFigures(metrics.registry, experiments, trainer)
    experiments.open_listeners.append(figures.attach)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await experiments.close()

    app = FastAPI(title="agl-events LightningStore server", lifespan=lifespan)
    app.state.experiments = experiments
    app.state.metrics = metrics

    async def experiment_store(request: Request) -> LightningStore:
        # Root routes have no {experiment} path parameter: they address the default experiment.
        return await experiments.get(request.path_params.get("experiment"))

    # The prefixed routes' path parameter, for the OpenAPI document: requests under the prefix reach the root
    # routes (see below), and `ExperimentPrefixMiddleware` answers an illegal name with a 404 (not a 422).
    async def experiment_parameter(experiment: Annotated[str, Path(description=EXPERIMENT_DESCRIPTION)]) -> None:
        return None

    async def store_failure(request: Request) -> str | None:
        return experiments.failure_of(request.path_params.get("experiment"))

    agl = create_agl_router(experiment_store, store_failure)
    otlp = create_otlp_router(experiment_store)
    # Each router at the root and under the experiment prefix, so the OpenAPI document has both. A request under
    # the prefix reaches the root routes (`ExperimentPrefixMiddleware` moves the prefix into `root_path`, as a
    # `Mount` does), so FastAPI tries it against one copy of the routes, not the root ones first and then these.
    for router in (agl, otlp, create_ui_router(experiments, figures)):
        app.include_router(router)
        app.include_router(router, prefix=EXPERIMENT_PREFIX, dependencies=[Depends(experiment_parameter)])
    app.include_router(create_metrics_router(metrics))

    @app.get("/health")
    async def health() -> dict[str, str]:
        """Liveness for probes; it touches no store, so it answers even while Kafka is unreachable."""
        return {"status": "ok"}

    # Last added is outermost: metrics see the status the error middleware produced.
    app.add_middleware(ExperimentPrefixMiddleware)  # innermost: routing only
    app.add_middleware(ForwardedMiddleware)  # the store sees it while deciding
    app.add_middleware(StoreErrorMiddleware)
    if auth is not None and auth.enabled:  # inside metrics, so refused requests are counted too
        app.add_middleware(AuthMiddleware, tokens=auth, default_experiment=experiments.default)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)  # counted by metrics too
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


class StoreServer(uvicorn.Server):
    """uvicorn's server, made to end: shutdown first answers every long poll (`wait_for_rollouts` with a long
    or no timeout would otherwise hold its connection open forever and the process with it), and a store
    that stops serving ends the process with status 1, for a supervisor to restart (the new process catches
    up from the view's stored positions; see `store.follower`)."""

    def __init__(self, config: uvicorn.Config, experiments: ExperimentStores) -> None:
        super().__init__(config)
        self._experiments = experiments
        experiments.on_failure = self._store_failed
        self.failed: BaseException | None = None

    def _store_failed(self, experiment: str, error: BaseException) -> None:
        logger.critical("the store of experiment %r stopped serving (%s); shutting down", experiment, error)
        self.failed = error
        self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._experiments.interrupt_waits()
        await super().shutdown(sockets)


def server_for(app: FastAPI, host: str, port: int, *, log_level: str = "info") -> StoreServer:
    """A StoreServer for `app`. Keep-alive is 30 s, as upstream's launcher sets it: the aiohttp client pools
    connections for 15 s, and a server closing them sooner makes requests fail with ServerDisconnectedError
    (then retried after /health)."""
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                            timeout_keep_alive=30, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS)
    return StoreServer(config, app.state.experiments)


def serve(app: FastAPI, host: str = "0.0.0.0", port: int = DEFAULT_PORT, *, log_level: str = "info") -> None:
    """Run `app` until SIGINT/SIGTERM (blocking); exits with status 1 if a store stopped serving."""
    logger.info("Serving the store API on http://%s:%d", host, port)
    server = server_for(app, host, port, log_level=log_level)
    server.run()
    if server.failed is not None:
        raise SystemExit(1)


__all__ = ["DEFAULT_PORT", "EXPERIMENT_PREFIX", "StoreServer", "create_app", "serve", "server_for"]

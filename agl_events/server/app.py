"""The REST server: Agent Lightning's store API for many experiments in one process.

The default experiment is served at the root (`/v1/agl/...`, `/v1/traces`), exactly where upstream's server
has it, and every experiment also under `/experiments/<name>` (`/experiments/exp1/v1/agl/...`), so
`LightningStoreClient("http://host:4747/experiments/exp1")` works unchanged: the client only appends paths.
Each experiment gets its own store from `store_for(name)`, created on first use and cached.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import Depends, FastAPI, Request

from agl_events.server.errors import StoreErrorMiddleware
from agl_events.server.experiments import EXPERIMENT_PREFIX, ExperimentStores, StoreFactory
from agl_events.server.metrics import HttpMetrics, MetricsMiddleware, create_metrics_router
from agl_events.server.otlp import create_otlp_router
from agl_events.server.routes import create_agl_router
from agl_events.store.base import LightningStore

DEFAULT_PORT = 4747

logger = logging.getLogger("agl_events.server")


def create_app(
    store_for: StoreFactory, default_experiment: str = "default", *, metrics: HttpMetrics | None = None
) -> FastAPI:
    """Build the app. `store_for(name)` is awaited once per experiment, on that experiment's first request.

    `metrics` lets a caller share a Prometheus registry; by default the app gets a fresh one (with process
    collectors), served at `/metrics`. Stores with a `close()` are closed when the app shuts down.
    """
    experiments = ExperimentStores(store_for, default_experiment)
    metrics = metrics or HttpMetrics.with_default_collectors()

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

    async def valid_experiment(request: Request) -> None:
        experiments.resolve_name(request.path_params.get("experiment"))

    agl = create_agl_router(experiment_store)
    otlp = create_otlp_router(experiment_store)
    for router in (agl, otlp):
        app.include_router(router)
        app.include_router(router, prefix=EXPERIMENT_PREFIX, dependencies=[Depends(valid_experiment)])
    app.include_router(create_metrics_router(metrics))

    @app.get("/health", include_in_schema=False)
    async def health() -> dict[str, str]:
        """Liveness for probes; it touches no store, so it answers even while Kafka is unreachable."""
        return {"status": "ok"}

    # Last added is outermost: metrics see the status the error middleware produced.
    app.add_middleware(StoreErrorMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


def serve(app: FastAPI, host: str = "0.0.0.0", port: int = DEFAULT_PORT, *, log_level: str = "info") -> None:
    """Run `app` with uvicorn until interrupted (blocking).

    Keep-alive is 30 s, as upstream's launcher sets it: the aiohttp client pools connections for 15 s, and a
    server closing them sooner makes requests fail with ServerDisconnectedError (then retried after /health).
    """
    logger.info("Serving the store API on http://%s:%d", host, port)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False, timeout_keep_alive=30)


__all__ = ["DEFAULT_PORT", "EXPERIMENT_PREFIX", "create_app", "serve"]

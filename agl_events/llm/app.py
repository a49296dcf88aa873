"""The proxy's HTTP face: OpenAI's routes under `/rollout/{rollout_id}/attempt/{attempt_id}`.

The rollout and attempt travel in the URL (upstream's scheme), so any OpenAI client pointed at
`LLMProxy.as_resource(rid, aid).endpoint` is attributed with no header or SDK hook. Routes answer with
and without the `/v1` segment, as LiteLLM's proxy does (upstream's `as_resource` gives no `/v1`, its
`ProxyLLM` endpoints usually end in one). A call outside a rollout path is refused with the expected path:
it could not be attributed, and training data without a rollout is lost data. `/metrics` serves the
proxy's figures (`llm.metrics`) with its HTTP request metrics.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from agl_events.config import Settings
from agl_events.llm.forward import Forwarder, error_response
from agl_events.llm.metrics import ProxyMetrics
from agl_events.llm.recorder import SpanRecorder, UnknownAttemptError
from agl_events.llm.routing import ModelRouter, UnknownModelError
from agl_events.llm.spans import CallKind, parse_traceparent
from agl_events.log.registry import codec_for
from agl_events.log.writer import EventWriter
from agl_events.server.client import StoreClient, StoreUnavailableError
from agl_events.server.metrics import HttpMetrics, MetricsMiddleware, create_metrics_router

log = logging.getLogger(__name__)

ROLLOUT_PREFIX = "/rollout/{rollout_id}/attempt/{attempt_id}"
ROUTE_HINT = (f"send OpenAI requests to {ROLLOUT_PREFIX}/v1/chat/completions (or /v1/completions): use "
              "LLMProxy.as_resource(rollout_id, attempt_id).endpoint, or ProxyLLM.get_base_url(rollout_id, "
              "attempt_id), as base URL")


def proxy_producer_id() -> str:
    return f"llm-proxy-{socket.gethostname()}-{os.getpid()}"


def create_proxy_app(router: ModelRouter, store_url: str, settings: Settings, *,
                     request_timeout: float = 600.0) -> FastAPI:
    """The app; its clients (store, Kafka producer, HTTP pool to the backends) live as long as it serves.

    `store_url` is the experiment's URL on the store server (what runners are given), `settings` say
    where its Kafka log is and which token the store asks for.
    """
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # No linger: each call waits for its own spans' acknowledgement, so lingering would only delay the
        # answer; calls that overlap still share a produce request while one is in flight.
        writer = EventWriter(settings.bootstrap_servers, settings.experiment,
                             codec_for(settings.schema_registry_url), producer_id=proxy_producer_id(),
                             **{"linger.ms": 0})
        store = StoreClient(store_url, auth_token=settings.store_token)
        http = httpx.AsyncClient(timeout=request_timeout, limits=httpx.Limits(max_connections=None,
                                                                              max_keepalive_connections=256))
        app.state.forwarder = Forwarder(router, SpanRecorder(store, writer), http, proxy_metrics)
        try:
            yield
        finally:
            await http.aclose()
            await store.close()
            writer.close()

    metrics = HttpMetrics.with_default_collectors()
    proxy_metrics = ProxyMetrics(metrics.registry)
    app = FastAPI(title="agl-events LLM proxy", lifespan=lifespan)
    app.state.metrics = metrics
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.include_router(create_metrics_router(metrics))  # before the catch-all route below

    async def proxied(kind: CallKind, rollout_id: str, attempt_id: str, request: Request) -> Response:
        try:
            body: Any = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return error_response(400, f"the request body is not JSON: {exc}", "invalid_request_error")
        if not isinstance(body, dict):
            return error_response(400, "the request body must be a JSON object", "invalid_request_error")
        forwarder: Forwarder = app.state.forwarder
        try:
            return await forwarder.call(rollout_id, attempt_id, kind, body,
                                        parse_traceparent(request.headers.get("traceparent")))
        except UnknownModelError as exc:
            return error_response(404, str(exc), "model_not_found")
        except UnknownAttemptError as exc:
            return error_response(404, str(exc), "rollout_not_found")
        except (StoreUnavailableError, ValueError) as exc:
            return error_response(503, f"the store cannot attribute this call: {exc}", "store_unavailable")

    async def chat(rollout_id: str, attempt_id: str, request: Request) -> Response:
        return await proxied("chat", rollout_id, attempt_id, request)

    async def completions(rollout_id: str, attempt_id: str, request: Request) -> Response:
        return await proxied("completion", rollout_id, attempt_id, request)

    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "agl-events"}
                                           for name in router.names]}

    async def unattributed(path: str) -> Response:
        return error_response(404, f"/{path} names no rollout: {ROUTE_HINT}", "rollout_path_missing")

    for version in ("/v1", ""):
        app.add_api_route(f"{ROLLOUT_PREFIX}{version}/chat/completions", chat, methods=["POST"])
        app.add_api_route(f"{ROLLOUT_PREFIX}{version}/completions", completions, methods=["POST"])
        app.add_api_route(f"{ROLLOUT_PREFIX}{version}/models", models, methods=["GET"])
        app.add_api_route(f"{version}/models", models, methods=["GET"])

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    app.add_api_route("/{path:path}", unattributed, methods=["POST", "GET"])
    return app

"""Prometheus metrics of the REST server: request count and latency by method, route template and status.

Routes are labelled by their template (`/v1/agl/rollouts/{rollout_id}`), never the raw path, so the number
of series stays bounded however many rollouts there are; unmatched paths share one `<unmatched>` label.
Each app gets its own `CollectorRegistry`, so several apps in one process (tests) do not collide.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Metric,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agl_events.server.experiments import EXPERIMENT_PREFIX, ExperimentStores

#: Seconds; from fast reads to long `wait_for_rollouts` polls.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
UNMATCHED = "<unmatched>"
CLIENT_CLOSED = 499  # nginx's "client closed request": the request was cancelled before a response


class HttpMetrics:
    """The metric families, registered once on `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        labels = ("method", "route", "status")
        self.requests = Counter(
            "agl_http_requests", "HTTP requests served, by route template and status.", labels, registry=registry
        )
        self.latency = Histogram(
            "agl_http_request_duration_seconds", "HTTP request latency, by route template and status.", labels,
            buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.in_progress = Gauge(
            "agl_http_requests_in_progress", "HTTP requests being served now.", ("method",), registry=registry
        )

    @classmethod
    def with_default_collectors(cls) -> HttpMetrics:
        """A fresh registry with process and platform collectors, as the global default registry has."""
        registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        return cls(registry)


class StoreHealthCollector:
    """`agl_store_healthy{experiment}`: 1 while an opened store serves, 0 once its view stopped following the
    log. Read at scrape time, so it needs no updating."""

    def __init__(self, experiments: ExperimentStores) -> None:
        self._experiments = experiments

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("agl_store_healthy", "1 while the experiment's store serves, 0 once it "
                                  "stopped (its view no longer follows the log).", labels=["experiment"])
        for name in self._experiments.opened:
            gauge.add_metric([name], 0.0 if self._experiments.failure_of(name) else 1.0)
        yield gauge


class BackpressureCollector:
    """`agl_store_backpressure_waits_total{experiment,queue}` and `agl_store_backpressure_wait_seconds_total`:
    how often, and how long, callers waited for room in a bounded queue of an opened store's write path
    (`committer`: commands; `producer`, `tasks_producer`: the Kafka producers' local queues). Full queues
    block, never drop (docs/reliability.md), so these tell a flood slowed down from one refused."""

    def __init__(self, experiments: ExperimentStores) -> None:
        self._experiments = experiments

    def collect(self) -> Iterator[Metric]:
        labels = ["experiment", "queue"]
        waits = CounterMetricFamily("agl_store_backpressure_waits", "Times a caller found a bounded queue of "
                                    "the store's write path full and waited for room.", labels=labels)
        seconds = CounterMetricFamily("agl_store_backpressure_wait_seconds", "Seconds callers spent waiting "
                                      "for room in a bounded queue of the store's write path.", labels=labels)
        for name, store in self._experiments.opened.items():
            for queue, stats in store.backpressure().items():  # stores that write nothing have no queues
                waits.add_metric([name, queue], stats.waits)
                seconds.add_metric([name, queue], stats.seconds)
        yield waits
        yield seconds


def route_template(scope: Scope) -> str:
    """The matched route's path template, with the `/experiments/{experiment}` prefix put back.

    FastAPI (0.16x) reports routes of an included router by their own path, without the include prefix,
    so the experiment prefix is restored from the `experiment` path parameter.
    """
    path = getattr(scope.get("route"), "path", None)
    if not path:
        return UNMATCHED
    if "experiment" in scope.get("path_params", {}) and not path.startswith(EXPERIMENT_PREFIX):
        return EXPERIMENT_PREFIX + path
    return path


class MetricsMiddleware:
    """Pure ASGI middleware timing every HTTP request and counting it under its route template."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "?")
        status = 500  # what the client gets if the app raises before answering
        started = time.perf_counter()
        self.metrics.in_progress.labels(method).inc()

        async def send_recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_recording)
        except asyncio.CancelledError:
            status = CLIENT_CLOSED
            raise
        finally:
            self.metrics.in_progress.labels(method).dec()
            labels = (method, route_template(scope), str(status))
            self.metrics.requests.labels(*labels).inc()
            self.metrics.latency.labels(*labels).observe(time.perf_counter() - started)


def create_metrics_router(metrics: HttpMetrics) -> APIRouter:
    """`GET /metrics` in the Prometheus text format."""
    router = APIRouter()

    @router.get("/metrics", response_class=PlainTextResponse,
                responses={200: {"description": "The Prometheus text format",
                                 "content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return router

"""HTTP calls per rollout, by route, read from the store server's own `/metrics` over a measured window.

A rollout's cost on the store is largely its round trips (each an HTTP request parsed, a command decided,
an answer encoded), so the bench reads `agl_http_requests_total` before and after its window and divides
each route's increase by the rollouts run. The bench drives its store in-process (no HTTP), so every call
counted in the window came from the runners (claims, finishes, heartbeats, resources, sequence ids).
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit, urlunsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

#: The counter the server's `MetricsMiddleware` keeps (prometheus_client adds `_total` to the sample).
REQUESTS_SAMPLE = "agl_http_requests_total"


def requests_by_route(metrics_text: str) -> Counter[str]:
    """Requests served so far, by "METHOD route template" (every status together)."""
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == REQUESTS_SAMPLE:
                counts[f"{sample.labels['method']} {sample.labels['route']}"] += int(sample.value)
    return counts


def metrics_url(store_url: str) -> str:
    """The server's `/metrics` (served at its root) for a store URL that may carry an experiment path."""
    parts = urlsplit(store_url)
    return urlunsplit(parts._replace(path="/metrics", query=""))


async def read_requests(store_url: str) -> Counter[str]:
    """The server's request counts now (the scrape itself is counted after it is answered)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.get(metrics_url(store_url))
        response.raise_for_status()
        return requests_by_route(response.text)


def per_rollout(before: Counter[str], after: Counter[str], rollouts: int, skip: str = "/metrics"
                ) -> dict[str, float]:
    """Each route's calls in the window per rollout, largest first, without the scrapes of `/metrics`."""
    grown = {route: after[route] - before[route] for route in after
             if after[route] > before[route] and not route.endswith(skip)}
    return {route: calls / rollouts for route, calls in sorted(grown.items(), key=lambda kv: -kv[1])}

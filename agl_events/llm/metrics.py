"""The LLM proxy's figures for Prometheus: call latency (the backend's part and the whole call), calls by
status, tokens. Served at the proxy's `/metrics` with its HTTP request metrics (`server.metrics.HttpMetrics`).

Observed once per call, when its spans are written (`llm.forward`): "total" runs from the call's arrival to
its spans being durable, which is when the agent gets its answer; "backend" until the backend's last byte.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from agl_events.llm.spans import CallError, LlmCall, prompt_token_ids, response_token_ids
from agl_events.server.metrics import LATENCY_BUCKETS

#: Seconds; LLM calls take from milliseconds (a cache hit) to minutes (long generations).
CALL_BUCKETS = (*LATENCY_BUCKETS, 120.0, 300.0, 600.0)


class ProxyMetrics:
    """The proxy's metric families, registered once on `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.duration = Histogram("agl_proxy_call_duration_seconds", "LLM call latency by model: `backend` until "
                                  "the backend's answer ended, `total` until the call's spans were durable.",
                                  ["model", "stage"], buckets=CALL_BUCKETS, registry=registry)
        self.calls = Counter("agl_proxy_calls", "LLM calls by model and the HTTP status the agent got.",
                             ["model", "status"], registry=registry)
        self.tokens = Counter("agl_proxy_tokens", "Tokens of answered calls by model (`prompt`, `completion`): "
                              "the backend's usage, else the token ids it returned.", ["model", "kind"],
                              registry=registry)

    def observe(self, call: LlmCall, unrecorded: CallError | None) -> None:
        """One call whose spans were just written (`unrecorded`: why they could not be, then the agent's error)."""
        model = call.model_name
        self.duration.labels(model, "backend").observe(max(call.end_time - call.start_time, 0.0))
        self.duration.labels(model, "total").observe(max(time.time() - call.start_time, 0.0))
        failure = unrecorded or call.error
        self.calls.labels(model, str(200 if failure is None else failure.status)).inc()
        for kind, count in tokens(call).items():
            if count > 0:
                self.tokens.labels(model, kind).inc(count)


def tokens(call: LlmCall) -> dict[str, int]:
    """Prompt and completion tokens of a call: the backend's `usage` when it reports one, else the token ids it
    returned (what the proxy records for training)."""
    usage: Any = (call.response or {}).get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
        return {"prompt": usage["prompt_tokens"], "completion": int(usage.get("completion_tokens") or 0)}
    return {"prompt": len(prompt_token_ids(call)), "completion": len(response_token_ids(call))}

"""A flood of enqueues and spans from many clients: callers slow down, the store's memory must not grow.

    python -m agl_events.bench.flood [--seconds 300] [--clients 32] [--sample-every 5]

An `agl-events store` server is started on a fresh experiment on the local (or configured) broker; `--clients`
concurrent HTTP clients (httpx, loopback) then call it as fast as it answers for `--seconds`: each keeps
one rollout of its own and sends, in turn, an enqueue of 4 rollouts (nobody dequeues them: the queue grows
all along) and two spans of that rollout. The server's RSS is sampled every `--sample-every` seconds.
Printed: requests/s, latency p50/p99, errors by status, RSS in the first and the last minute and its
maximum, the server's back-pressure counters from `/metrics`, and a last line of JSON. Every queue on the
path is bounded and blocks (docs/reliability.md), so a plateau is the expected outcome; growth is a bug.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agl_events.bench.history import agl_events_process, memory_mb
from agl_events.bench.store_latency import percentile
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import create_topics, delete_topics
from agl_events.log.clients import make_admin
from agl_events.proc.ports import free_port

AGL = "/v1/agl"
ENQUEUE_BATCH = 4


@dataclass
class Tally:
    """What the clients saw: each request's latency in seconds, and statuses that were not a success."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    spans: int = 0
    enqueued: int = 0


def _span(rollout: dict[str, Any], sequence_id: int) -> dict[str, Any]:
    """A span of the size a traced agent step has: a few attributes, a prompt-like string."""
    return {
        "rollout_id": rollout["rollout_id"], "attempt_id": rollout["attempt"]["attempt_id"],
        "sequence_id": sequence_id, "trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16],
        "parent_id": None, "name": "flood.step", "status": {"status_code": "OK"},
        "attributes": {"step": sequence_id, "prompt": "Reverse the digits 1 2 3. " * 20, "tokens": 120},
        "events": [], "links": [], "start_time": time.time(), "end_time": time.time(), "context": None,
        "parent": None, "resource": {"attributes": {}, "schema_url": ""},
    }


async def _client(http: httpx.AsyncClient, deadline: float, tally: Tally) -> None:
    """One caller: its own rollout, then enqueue, span, span, ... until the deadline."""
    rollout = (await http.post(f"{AGL}/rollouts", json={"input": "flood"})).raise_for_status().json()
    sequence_id = 0
    while time.perf_counter() < deadline:
        sequence_id += 1
        if sequence_id % 3 == 0:
            request = http.post(f"{AGL}/queues/rollouts/enqueue",
                                json={"rollouts": [{"input": {"n": sequence_id}}] * ENQUEUE_BATCH})
        else:
            request = http.post(f"{AGL}/spans", json=_span(rollout, sequence_id))
        started = time.perf_counter()
        try:
            response = await request
        except httpx.HTTPError as exc:
            tally.errors[type(exc).__name__] += 1
            continue
        tally.latencies.append(time.perf_counter() - started)
        if response.status_code != 201:
            tally.errors[str(response.status_code)] += 1
        elif sequence_id % 3 == 0:
            tally.enqueued += ENQUEUE_BATCH
        else:
            tally.spans += 1


async def _sample_rss(pid: int, every: float, deadline: float, samples: list[tuple[float, float]]) -> None:
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        samples.append((time.perf_counter() - started, memory_mb(pid, "VmRSS")))
        await asyncio.sleep(every)


def _backpressure(metrics_text: str) -> dict[str, float]:
    """The server's back-pressure counters, by metric and queue, summed over experiments."""
    found: dict[str, float] = {}
    pattern = r'^(agl_store_backpressure_\w+_total)\{experiment="[^"]*",queue="([^"]+)"\} (\S+)$'
    for name, queue, value in re.findall(pattern, metrics_text, re.MULTILINE):
        key = f"{name.removeprefix('agl_store_backpressure_')}_{queue}"
        found[key] = found.get(key, 0.0) + float(value)
    return found


def _minute_mb(samples: list[tuple[float, float]], first: bool) -> float:
    """Mean RSS over the first (or last) 60 s of samples."""
    end = samples[-1][0]
    window = [mb for t, mb in samples if (t < 60 if first else t >= end - 60)]
    return statistics.fmean(window)


async def _flood(url: str, pid: int, seconds: float, clients: int, sample_every: float) -> dict[str, Any]:
    tally, samples = Tally(), list[tuple[float, float]]()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(_sample_rss(pid, sample_every, deadline, samples),
                             *[_client(http, deadline, tally) for _ in range(clients)])
        elapsed = time.perf_counter() - started
        metrics = (await http.get("/metrics")).text
    ms = [s * 1000 for s in tally.latencies]
    return {
        "seconds": elapsed, "clients": clients, "requests_per_s": len(ms) / elapsed,
        "spans_per_s": tally.spans / elapsed, "enqueued_per_s": tally.enqueued / elapsed,
        "latency_p50_ms": statistics.median(ms), "latency_p99_ms": percentile(ms, 0.99),
        "errors": dict(tally.errors),
        "rss_first_minute_mb": _minute_mb(samples, first=True), "rss_last_minute_mb": _minute_mb(samples, first=False),
        "rss_max_mb": max(mb for _, mb in samples), "store_peak_rss_mb": memory_mb(pid),
        "rss_samples_mb": [round(mb, 1) for _, mb in samples],
        "backpressure": _backpressure(metrics),
    }


def measure(settings: Settings, seconds: float, clients: int, sample_every: float) -> dict[str, Any]:
    bootstrap = ensure_broker(settings)
    experiment = f"bench-flood-{uuid.uuid4().hex[:8]}"
    create_topics(make_admin(bootstrap), experiment)
    port, home = free_port(), Path(tempfile.mkdtemp(prefix="agl-bench-flood-"))
    env = {"AGL_EXPERIMENT": experiment, "AGL_KAFKA_BOOTSTRAP": bootstrap, "AGL_HOME": str(home)}
    url = f"http://127.0.0.1:{port}"
    try:
        with agl_events_process(["store", "--host", "127.0.0.1", "--port", str(port)], env, home) as server:
            _wait_for(url, server)
            return asyncio.run(_flood(url, server.pid, seconds, clients, sample_every))
    finally:
        delete_topics(make_admin(bootstrap), f"agl.{experiment}.")


def _wait_for(url: str, server: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Until the server answers a store route (the first one opens the experiment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}{AGL}/rollouts", params={"limit": 1}, timeout=timeout).raise_for_status()
            return
        except httpx.TransportError:
            if server.poll() is not None:
                break
            time.sleep(0.5)
    raise RuntimeError("the store server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between RSS samples")
    args = parser.parse_args()
    figures = measure(Settings.from_env(), args.seconds, args.clients, args.sample_every)
    for name, value in figures.items():
        shown = f"{value:14,.1f}" if isinstance(value, float) else str(value)
        print(f"{name:24s} {shown}")
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()

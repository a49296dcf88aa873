"""Many experiments on one store server: first-call latency, a run of new experiments, and the shutdown after.

    python -m agl_events.bench.experiments [--first 20] [--sequence 100] [--single]

One `agl-events store` server (a store group per experiment, unless `--single`) on the broker of the settings
(`AGL_KAFKA_BOOTSTRAP`, else the local one). Each new experiment gets one `enqueue_rollout` through Agent
Lightning's own `LightningStoreClient` at `/experiments/<name>`, as a team sharing a server would:
- first call: `--first` experiments, one after another, on an otherwise idle server; each call's latency
  (it opens the experiment's store: topics, view, store group) -> median and p90;
- sequence: `--sequence` more experiments one after another -> the total time;
- shutdown: SIGTERM to the server that now holds them all -> seconds until it exited.
The experiments' topics are deleted at the end. Figures: docs/performance.md#many-experiments-on-one-server.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from agentlightning.store.client_server import LightningStoreClient

from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import delete_topics
from agl_events.log.clients import make_admin
from agl_events.server.process import StoreProcess

#: A hung server is killed after this; the figure then says so.
SHUTDOWN_LIMIT_SECONDS = 120.0


async def first_call(url: str, experiment: str) -> float:
    """Seconds for one `enqueue_rollout` on `experiment`, the first call it gets."""
    client = LightningStoreClient(f"{url}/experiments/{experiment}")
    try:
        started = time.perf_counter()
        await client.enqueue_rollout(input={"experiment": experiment})
        return time.perf_counter() - started
    finally:
        await client.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(settings: Settings, first: int, sequence: int, single: bool, work: Path) -> None:
    server = StoreProcess(settings, work / "views", work / "server.log", *(["--single"] if single else []))
    prefix = f"bench-{uuid.uuid4().hex[:6]}"
    names: list[str] = []
    try:
        server.start()
        latencies: list[float] = []
        for i in range(first):
            names.append(f"{prefix}-first-{i}")
            latencies.append(asyncio.run(first_call(server.url, names[-1])))
        print(f"first call on a new experiment ({first}, {'--single' if single else 'store group'}): "
              f"median {statistics.median(latencies):.3f} s, p90 {_percentile(latencies, 0.9):.3f} s, "
              f"max {max(latencies):.3f} s")
        started = time.perf_counter()
        for i in range(sequence):
            names.append(f"{prefix}-seq-{i}")
            asyncio.run(first_call(server.url, names[-1]))
        print(f"{sequence} experiments one after another: {time.perf_counter() - started:.1f} s")
        assert server.process is not None
        started = time.perf_counter()
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(SHUTDOWN_LIMIT_SECONDS)
            print(f"SIGTERM to exit, holding {len(names) + 1} experiments: {time.perf_counter() - started:.2f} s")
        except subprocess.TimeoutExpired:
            print(f"SIGTERM to exit, holding {len(names) + 1} experiments: still alive after "
                  f"{SHUTDOWN_LIMIT_SECONDS:.0f} s (killed); the end of its log:\n{server.tail(20)}")
    finally:
        server.stop()
        delete_topics(make_admin(settings.bootstrap_servers), f"agl.{prefix}-")  # waits: a request still
        # queued when the process ends is never sent, which left every experiment's topics on the broker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", type=int, default=20, help="experiments whose first call is timed")
    parser.add_argument("--sequence", type=int, default=100, help="experiments created one after another")
    parser.add_argument("--single", action="store_true", help="serve with --single (no store groups)")
    args = parser.parse_args()
    settings = Settings.from_env()
    settings = settings.model_copy(update={"bootstrap": ensure_broker(settings)})
    with tempfile.TemporaryDirectory(prefix="agl-bench-experiments-") as work:
        run(settings, args.first, args.sequence, args.single, Path(work))


if __name__ == "__main__":
    main()

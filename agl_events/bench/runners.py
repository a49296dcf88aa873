"""Dispatch latency and span throughput of runner processes, for 1, 4 and 16 runners.

    python -m agl_events.bench.runners [--rollouts 200] [--spans 20] [--runners 1 4 16] [--concurrency 1]

Dispatch latency is enqueue to the runner's claim, both on the store's clock (the rollout's start_time
and its attempt's start_time): "idle" with one rollout at a time, and under a burst of all rollouts at
once (then it is mostly time spent waiting in the queue). Span throughput is the spans of the burst
over the time from its first enqueue to its last finish: a rollout finishes once the store's view holds its
spans. The store is embedded in this process: its CPU per span over the burst (process time, all threads)
says what the store costs, which the machine's load moves far less than it moves spans/s. Runners are
started and warmed up (joined) before measuring; each runs `--concurrency` rollouts at once (1, upstream's
default, leaves a runner idle while it waits on the store and on acknowledgements). The raw producer rate of
the same spans, encoded as the runners' tracer encodes them (`bench.raw_limit`), is measured in the same run,
first; each row's `of_raw` is its spans/s over it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agl_events.bench.agents import span_burst
from agl_events.bench.cpu import CpuMeter
from agl_events.bench.profile import Profiler, top_frames
from agl_events.bench.raw_limit import encode_span_payloads, raw_produce_per_s
from agl_events.bench.store_latency import percentile
from agl_events.broker.local import LocalBroker
from agl_events.config import Settings
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.embedded import embedded_store_server
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import EnqueueRolloutRequest


async def _run_all(store: KafkaLightningStore, n: int, spans: int) -> list[str]:
    queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"spans": spans}) for _ in range(n)])
    ids = [r.rollout_id for r in queued]
    done: set[str] = set()
    while len(done) < len(ids):
        finished = await store.wait_for_rollouts(rollout_ids=[i for i in ids if i not in done], timeout=1.0)
        done.update(r.rollout_id for r in finished)
    return ids


async def measure(settings: Settings, runners: int, rollouts: int, spans: int, profile: Path | None = None,
                  concurrency: int = 1) -> dict[str, float]:
    """One row; with `profile`, py-spy samples this process (the embedded store) and the runners over the burst
    and their top frames are printed."""
    async with embedded_store_server(settings, Path(tempfile.mkdtemp(prefix="agl-bench-"))) as (store, url):
        pool = RunnerPool(RunnerConfig(settings=settings, store_url=url, agent="x", concurrency=concurrency), runners,
                          name=f"bench-{uuid.uuid4().hex[:4]}", agent=span_burst)
        pool.start()
        try:
            await _run_all(store, runners * 2, 1)  # warm-up: every runner has joined the task group
            runner_pids = {f"runner-{i}": p.pid for i, p in enumerate(pool.processes) if p.pid is not None}
            broker_pid = LocalBroker(settings).status().pid if settings.uses_local_broker else None
            meter = CpuMeter({"runners": list(runner_pids.values()), "broker": [broker_pid] if broker_pid else []})
            profiler = None if profile is None else Profiler(profile / f"runners-{runners}",
                                                             {"store": os.getpid(), **runner_pids})
            if profiler is not None:
                profiler.start()
            meter.start()
            started, cpu_started = time.time(), time.process_time()
            ids = await _run_all(store, rollouts, spans)
            burst_done, store_cpu = time.time(), time.process_time() - cpu_started
            cpu = meter.stop()
            for name, path in (profiler.stop() if profiler is not None else {}).items():
                for frame in top_frames(path, limit=12):
                    print(f"  {name:8s} self {frame.self_share:6.1%}  total {frame.total_share:6.1%}  {frame.frame}")
            idle = []
            for _ in range(20):  # one at a time: the latency of the path itself, with no queue in front
                rid = (await _run_all(store, 1, 1))[0]
                rollout, attempt = await store.get_rollout_by_id(rid), await store.get_latest_attempt(rid)
                idle.append((attempt.start_time - rollout.start_time) * 1000)
            latencies, span_count = [], 0
            for rid in ids:
                rollout = await store.get_rollout_by_id(rid)
                attempt = (await store.query_attempts(rid)).items[0]
                latencies.append((attempt.start_time - rollout.start_time) * 1000)
                span_count += (await store.query_spans(rid)).total
        finally:
            pool.stop(grace=10)
    elapsed = burst_done - started
    return {"runners": runners, "concurrency": concurrency, "idle_dispatch_p50_ms": statistics.median(idle),
            "idle_dispatch_p99_ms": percentile(idle, 0.99), "dispatch_p50_ms": statistics.median(latencies),
            "dispatch_p99_ms": percentile(latencies, 0.99), "rollouts_per_s": rollouts / elapsed,
            "spans_per_s": span_count / elapsed, "store_cpu_us_per_span": store_cpu / span_count * 1e6,
            **{f"{group}_cpu_us_per_span": cpu[group] / span_count * 1e6 for group in ("runners", "broker")
               if group in cpu}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--spans", type=int, default=20, help="spans per rollout (plus one reward)")
    parser.add_argument("--runners", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--concurrency", type=int, default=1, help="rollouts each runner runs at once")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the store over each burst, files here")
    args = parser.parse_args()
    payloads = encode_span_payloads([{"spans": args.spans}], agent=span_burst)
    raw = raw_produce_per_s(Settings.from_env().bootstrap_servers, payloads,
                            messages=max(20_000, min(args.rollouts * (args.spans + 1), 100_000)))["raw_produce_per_s"]
    print(f"raw producer, the same encoded spans: {raw:,.0f} records/s")
    rows = []
    for n in args.runners:
        settings = Settings.from_env(experiment=f"bench-runners-{uuid.uuid4().hex[:8]}")
        row = asyncio.run(measure(settings, n, args.rollouts, args.spans, args.profile, args.concurrency))
        rows.append({**row, "raw_produce_per_s": raw, "of_raw": row["spans_per_s"] / raw})
    table = Table(title=f"runners · {args.rollouts} rollouts x {args.spans + 1} spans")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(f"{v:.1%}" if k == "of_raw" else f"{v:.1f}" if isinstance(v, float) else str(v)
                        for k, v in row.items()))
    Console().print(table)
    print(json.dumps([{k: round(v, 3) for k, v in row.items()} for row in rows]))


if __name__ == "__main__":
    main()

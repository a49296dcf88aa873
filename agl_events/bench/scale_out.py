"""Scale-out: the same workload through 1, 2 and 3 store processes (a store group) and as many view processors.

    python -m agl_events.bench.scale_out [--stores 1 2 3] [--rollouts 400] [--spans 10] [--runners 4]
                                         [--concurrency 8]

Each size gets a fresh experiment: S `agl-events store` processes sharing it by partition, S
`agl_events.processors.views` workers, runner processes spread over the stores (runner i talks to store i % S),
rollouts enqueued through every store in turn. Figures: rollouts/s and spans/s from the first enqueue to the last
finish, CPU seconds per rollout of the stores, processors, runners and broker, and the events the busiest store
folded per rollout (`agl_store_events_applied`: a store of a group folds only its own partitions, so its fold
work is about 1/S of one store's). On one machine every process shares its cores, so more stores cannot add CPU;
the figures say what a store group costs and where the time goes (docs/performance.md#scale-out).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from agl_events.bench.agents import span_burst
from agl_events.bench.cpu import CpuMeter
from agl_events.broker.local import LocalBroker
from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.processors.background import WorkerProcess
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.process import StoreProcess

ENQUEUE_BATCH = 50


def _settled(stores: list[StoreProcess], partitions: int = 3, timeout: float = 120.0) -> None:
    """Until every rollouts partition has exactly one owner among `stores`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owned = [p for s in stores
                 for p in httpx.get(f"{s.url}/v1/agl/statistics", timeout=10).json()["store_group"]["owned"]]
        if sorted(owned) == list(range(partitions)):
            return
        time.sleep(0.2)
    raise TimeoutError("the store group did not settle")


def _folded(store: StoreProcess) -> float:
    """Events the store's follower has folded since it started (all topics and kinds, from `/metrics`)."""
    text = httpx.get(f"{store.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("agl_store_events_applied_total{"))


def _run(stores: list[StoreProcess], rollouts: int, spans: int) -> list[str]:
    """Enqueue through every store in turn, then wait until all finished; the rollout ids."""
    ids: list[str] = []
    with httpx.Client(timeout=120) as http:
        for i in range(0, rollouts, ENQUEUE_BATCH):
            store = stores[(i // ENQUEUE_BATCH) % len(stores)]
            batch = [{"input": {"spans": spans}} for _ in range(min(ENQUEUE_BATCH, rollouts - i))]
            ids += [r["rollout_id"] for r in http.post(f"{store.base}/queues/rollouts/enqueue",
                                                       json={"rollouts": batch}).json()]
        waiting = set(ids)
        while waiting:
            done = http.post(f"{stores[0].base}/waits/rollouts", json={"rollout_ids": sorted(waiting),
                                                                        "timeout": 5}).json()
            waiting -= {r["rollout_id"] for r in done}
    return ids


def measure(settings: Settings, n_stores: int, rollouts: int, spans: int, runners: int, concurrency: int,
            work: Path) -> dict[str, Any]:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    stores = [StoreProcess(settings, work / f"views-{i}", work / f"store-{i}.log") for i in range(n_stores)]
    processors = [WorkerProcess(settings, "agl_events.processors.views", ["--data-dir", str(work / f"processor-{i}"),
                                                               "--loglevel", "warning"], work / f"processor-{i}.log")
                  for i in range(n_stores)]
    pools: list[RunnerPool] = []
    try:
        for store in stores:
            store.start()
        _settled(stores)
        pools = [RunnerPool(RunnerConfig(settings=settings, store_url=stores[i % n_stores].url, agent="x",
                                         concurrency=concurrency), 1, name=f"scale-{i}-{uuid.uuid4().hex[:4]}",
                            agent=span_burst) for i in range(runners)]
        for pool in pools:
            pool.start()
        _run(stores, runners * concurrency, 1)  # warm-up: every runner has joined the task group
        broker = LocalBroker(settings).status().pid if settings.uses_local_broker else None
        meter = CpuMeter({"stores": [s.pid for s in stores if s.pid],
                          "processors": [p.pid for p in processors if p.pid],
                          "runners": [p.pid for pool in pools for p in pool.alive() if p.pid],
                          "broker": [broker] if broker else []})
        folded = [_folded(s) for s in stores]
        meter.start()
        started = time.perf_counter()
        _run(stores, rollouts, spans)
        elapsed = time.perf_counter() - started
        cpu = meter.stop()
        folded = [_folded(s) - before for s, before in zip(stores, folded, strict=True)]
    finally:
        for pool in pools:
            pool.stop(grace=10)
        for process in [*stores, *processors]:
            process.stop(grace=10)
    per_rollout = {f"{k}_cpu_ms": 1000 * v / rollouts for k, v in cpu.items() if k not in ("wall", "cores")}
    return {"stores": n_stores, "rollouts_per_s": rollouts / elapsed, "spans_per_s": rollouts * (spans + 1) / elapsed,
            **per_rollout, "store_cpu_ms_each": per_rollout["stores_cpu_ms"] / n_stores,
            "folded_per_rollout_max_store": max(folded) / rollouts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--rollouts", type=int, default=400)
    parser.add_argument("--spans", type=int, default=10, help="spans per rollout (plus one reward)")
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts each runner runs at once")
    args = parser.parse_args()
    rows = []
    for n in args.stores:
        settings = Settings.from_env(experiment=f"bench-scale-{uuid.uuid4().hex[:8]}")
        with tempfile.TemporaryDirectory(prefix="agl-scale-") as work:
            rows.append(measure(settings, n, args.rollouts, args.spans, args.runners, args.concurrency, Path(work)))
    table = Table(title=f"store group · {args.rollouts} rollouts x {args.spans + 1} spans · {args.runners} runners "
                        f"x {args.concurrency} slots · {os.cpu_count()} cores")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row.values()))
    Console().print(table)
    print(json.dumps([{k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()} for row in rows]))


if __name__ == "__main__":
    main()

"""Latency of the Kafka store's core paths, on the local (or configured) broker.

    python -m agl_events.bench.store_latency [--rollouts 200]

Prints, as a table and a last line of JSON: enqueue and dequeue throughput through the group committer,
and `wait_for_rollouts` wake-up latency (a runner marks the attempt succeeded; how long until a waiter
blocked in wait_for_rollouts returns), p50 and p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agl_events.config import Settings
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import EnqueueRolloutRequest


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(settings: Settings, rollouts: int) -> dict[str, float]:
    store = await KafkaLightningStore.open(settings, view_dir=Path(tempfile.mkdtemp(prefix="agl-bench-")))
    try:
        started = time.perf_counter()
        await asyncio.gather(*[store.enqueue_rollout(input=i) for i in range(rollouts)])
        enqueue_s = time.perf_counter() - started
        started = time.perf_counter()
        claimed = await asyncio.gather(*[store.dequeue_rollout(worker_id=f"w{i % 8}") for i in range(rollouts)])
        dequeue_s = time.perf_counter() - started
        await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(rollouts)])
        wakeups: list[float] = []
        for attempt in claimed[: min(rollouts, 100)]:
            assert attempt is not None
            waiter = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[attempt.rollout_id], timeout=30))
            await asyncio.sleep(0.005)  # let the waiter block first
            finished_at = time.perf_counter()
            await store.update_attempt(attempt.rollout_id, attempt.attempt.attempt_id, status="succeeded")
            await waiter
            wakeups.append((time.perf_counter() - finished_at) * 1000)
    finally:
        await store.close()
    return {
        "enqueue_per_s": rollouts / enqueue_s,
        "dequeue_per_s": rollouts / dequeue_s,
        "wait_wakeup_p50_ms": statistics.median(wakeups),
        "wait_wakeup_p99_ms": percentile(wakeups, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=200)
    args = parser.parse_args()
    settings = Settings.from_env(experiment=f"bench-{uuid.uuid4().hex[:8]}")
    figures = asyncio.run(measure(settings, args.rollouts))
    print_figures(f"store latency · {settings.bootstrap_servers} · {args.rollouts} rollouts", figures)


def print_figures(title: str, figures: dict[str, float]) -> None:
    """A bench's figures as a table, then as a last line of JSON for scripts."""
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures.items():
        table.add_row(name, f"{value:,.1f}")
    Console().print(table)
    print(json.dumps({k: round(v, 2) for k, v in figures.items()}))


if __name__ == "__main__":
    main()

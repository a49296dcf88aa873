"""Task-request ingestion's figures, on the local (or configured) broker.

    python -m agl_events.bench.ingest [--records 10000] [--runners 4]

Prints, as a table and a last line of JSON:
- produce: task records/s acknowledged by Kafka, from JSON lines through `produce_to_topic` (one idempotent
  producer, keys hashed from the lines), with no store running;
- ingest: task records/s from the task-requests topic to enqueued rollouts, timed from the moment the store
  is open (its view caught up, so its ingester starts) to the last rollout enqueued;
- finish (with --runners above 0): rollouts/s a runner pool on the task topic finishes them, timed from the
  store being open too, so it includes ingestion (a one-span agent: the pipeline's cost, not an agent's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

from agl_events.bench.agents import span_burst
from agl_events.bench.store_latency import print_figures
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin, make_producer
from agl_events.produce.to_kafka import produce_to_topic
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.embedded import embedded_store_server
from agl_events.topics import Topic, topic_name


def measure_produce(settings: Settings, records: int) -> float:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    lines = [json.dumps({"input": {"spans": 1, "i": i}, "mode": "train"}) for i in range(records)]
    producer = make_producer(settings.bootstrap_servers, "bench-ingest")
    started = time.perf_counter()
    try:
        report = produce_to_topic(producer, topic_name(settings.experiment, Topic.TASK_REQUESTS), lines)
    finally:
        producer.close()
    assert report.accepted == records and report.ok, report
    return records / (time.perf_counter() - started)


async def measure_ingest(settings: Settings, records: int, runners: int, work: Path) -> dict[str, float]:
    pool = None
    async with embedded_store_server(settings, work / "view") as (store, url):
        opened = time.perf_counter()
        if runners:
            pool = RunnerPool(RunnerConfig(settings=settings, store_url=url, agent="x"), runners,
                              name=f"bench-{uuid.uuid4().hex[:4]}", agent=span_burst)
            pool.start()
        try:
            while store.ingester.enqueued < records:
                await asyncio.sleep(0.01)
            figures = {"ingest_records_per_s": records / (time.perf_counter() - opened)}
            if pool is not None:
                ids = [r.rollout_id for r in await store.query_rollouts()]
                done: set[str] = set()
                while len(done) < records:
                    finished = await store.wait_for_rollouts(rollout_ids=[i for i in ids if i not in done],
                                                             timeout=1.0)
                    done.update(r.rollout_id for r in finished)
                figures["finished_rollouts_per_s"] = records / (time.perf_counter() - opened)
        finally:
            if pool is not None:
                pool.stop(grace=10)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="task records to produce and ingest")
    parser.add_argument("--runners", type=int, default=0, help="runner processes finishing the rollouts (0: none)")
    args = parser.parse_args()
    base = Settings.from_env()
    settings = base.model_copy(update={"bootstrap": ensure_broker(base),
                                       "experiment": f"bench-ingest-{uuid.uuid4().hex[:8]}"})
    figures = {"produce_records_per_s": measure_produce(settings, args.records)}
    figures |= asyncio.run(measure_ingest(settings, args.records, args.runners,
                                          Path(tempfile.mkdtemp(prefix="agl-bench-ingest-"))))
    print_figures(f"task ingestion · {settings.bootstrap_servers} · {args.records} records · "
                  f"{args.runners} runners", figures)


if __name__ == "__main__":
    main()

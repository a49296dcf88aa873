"""Memory as the history grows: peak RSS of a store server and of a view processor rebuilding N spans.

    python -m agl_events.bench.history [--spans 1000000] [--spans-per-rollout 1000] [--no-processor]

N SpanAdded events (the workload's own spans, re-stamped with fresh rollout/attempt/sequence ids and
encoded as the tracer encodes them) are produced to a throwaway experiment; then `agl-events store` starts
on it with an empty view folder, so every span passes through its fold (the worst case: a rebuild from
offset 0), and after it one `agl-events processor` worker does the same. The figures are each process's
peak RSS (VmHWM) once it has folded everything, and its rebuild rate. RocksDB keeps the views on disk, so
memory should stay bounded as N grows; this is what checks it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.progress import Progress

from agl_events.bench.stages import record_otel_spans, span_events
from agl_events.bench.workload import PRESETS
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics, delete_topics
from agl_events.log.clients import make_admin, make_producer
from agl_events.log.records import new_event_id
from agl_events.proc.ports import free_port
from agl_events.topics import Topic, topic_name


def produce_history(bootstrap: str, experiment: str, spans: int, per_rollout: int) -> float:
    """Produce `spans` SpanAdded events to the experiment's span topic; returns the seconds it took."""
    codec = AvroCodec()
    base = [e.record for e in span_events(record_otel_spans(PRESETS["medium"].tasks()))]
    producer = make_producer(bootstrap, "bench-history")
    topic = topic_name(experiment, Topic.SPANS)
    started = time.perf_counter()
    with Progress(transient=True) as progress:
        bar = progress.add_task(f"producing {spans:,} spans", total=spans)
        for i in range(spans):
            rid, seq = f"ro-hist{i // per_rollout:07d}", i % per_rollout + 1
            record = base[i % len(base)]
            span = {**record["span"], "rollout_id": rid, "attempt_id": f"at-{rid[3:]}", "sequence_id": seq}
            value = codec.encode("SpanAdded", {**record, "event_id": new_event_id(), "span": span})
            while True:
                try:
                    producer.produce(topic, value=value, key=rid.encode())
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 5000 == 0:
                producer.poll(0)
                progress.update(bar, completed=i)
        if producer.flush(120):
            raise RuntimeError("the broker did not take every span")
    return time.perf_counter() - started


def memory_mb(pid: int, field: str = "VmHWM") -> float:
    """A process's memory from /proc: its peak RSS (`VmHWM`) or current RSS (`VmRSS`), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextmanager
def agl_events_process(args: list[str], env: dict[str, str], folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m agl_events ARGS` in the background; stopped, and its data folder removed, on exit."""
    process = subprocess.Popen([sys.executable, "-m", "agl_events", *args], env={**os.environ, **env},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(60)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_until(done: Callable[[], bool], process: subprocess.Popen[bytes], timeout: float, what: str) -> float:
    """Seconds until `done()`; RuntimeError if `process` exits or `timeout` passes first."""
    started = time.perf_counter()
    while not done():
        if time.perf_counter() - started > timeout or process.poll() is not None:
            raise RuntimeError(f"{what} did not fold the history")
        time.sleep(0.5)
    return time.perf_counter() - started


def rebuild_rss(settings: Settings, experiment: str, timeout: float = 3600) -> dict[str, float]:
    """Start a store server on `experiment` with an empty view; peak RSS once it has folded everything."""
    port, views = free_port(), Path(tempfile.mkdtemp(prefix="agl-bench-history-"))
    env = {"AGL_EXPERIMENT": experiment, "AGL_KAFKA_BOOTSTRAP": settings.bootstrap_servers, "AGL_HOME": str(views)}

    def answered() -> bool:
        """The first request opens the experiment; it is answered once the store owns the partitions it folded
        to their ends, and a 503 (no owner within the router's 60 s, as a long rebuild takes) means not yet."""
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/v1/agl/rollouts", params={"limit": 1}, timeout=timeout)
        except httpx.TransportError:
            return False
        if response.status_code == 503:
            return False
        response.raise_for_status()
        return True

    with agl_events_process(["store", "--port", str(port)], env, views) as server:
        seconds = _wait_until(answered, server, timeout, "the store server")
        return {"rebuild_seconds": seconds, "store_rss_mb_after_rebuild": memory_mb(server.pid)}


def processor_rss(settings: Settings, experiment: str, spans: int, timeout: float = 3600) -> dict[str, float]:
    """Start a processor worker on `experiment` with an empty data folder; peak RSS once its span views
    hold all `spans` (their next offsets add up to it: the span topic holds nothing else)."""
    port, data = free_port(), Path(tempfile.mkdtemp(prefix="agl-bench-history-processor-"))
    env = {"AGL_EXPERIMENT": experiment, "AGL_KAFKA_BOOTSTRAP": settings.bootstrap_servers}
    spans_topic = topic_name(experiment, Topic.SPANS)
    with Progress(transient=True) as progress, \
            agl_events_process(["processor", "--data-dir", str(data), "--web-port", str(port)], env, data) as worker:
        bar = progress.add_task("processor rebuilding", total=spans)

        def folded_all() -> bool:
            try:
                stats = httpx.get(f"http://127.0.0.1:{port}/views/stats", timeout=10).json()
            except (httpx.TransportError, ValueError):
                return False
            folded = sum(p["next_offset"] for p in stats["partitions"] if p["topic"] == spans_topic)
            progress.update(bar, completed=folded)
            return bool(folded >= spans)

        seconds = _wait_until(folded_all, worker, timeout, "the processor")
        return {"processor_rebuild_seconds": seconds, "processor_rss_mb_after_rebuild": memory_mb(worker.pid)}


def measure(settings: Settings, spans: int, per_rollout: int = 1000, processor: bool = True) -> dict[str, Any]:
    bootstrap = ensure_broker(settings)
    settings = settings.model_copy(update={"bootstrap": bootstrap})
    experiment = f"bench-history-{uuid.uuid4().hex[:8]}"
    create_topics(make_admin(bootstrap), experiment)
    try:
        produce_seconds = produce_history(bootstrap, experiment, spans, per_rollout)
        figures: dict[str, Any] = rebuild_rss(settings, experiment)
        figures["rebuild_spans_per_s"] = spans / figures["rebuild_seconds"]
        if processor:
            figures.update(processor_rss(settings, experiment, spans))
            figures["processor_spans_per_s"] = spans / figures["processor_rebuild_seconds"]
    finally:
        delete_topics(make_admin(bootstrap), f"agl.{experiment}.")
    return {"history_spans": spans, "history_produce_seconds": produce_seconds, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--spans-per-rollout", type=int, default=1000)
    parser.add_argument("--no-processor", action="store_true", help="measure the store server only")
    args = parser.parse_args()
    figures = measure(Settings.from_env(), args.spans, args.spans_per_rollout, processor=not args.no_processor)
    for name, value in figures.items():
        print(f"{name:32s} {value:14,.1f}")
    print(json.dumps({k: round(v, 2) for k, v in figures.items()}))


if __name__ == "__main__":
    main()

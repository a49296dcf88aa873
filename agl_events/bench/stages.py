"""Where the time of one span goes, stage by stage, each measured alone on one core.

    python -m agl_events.bench.stages [--rollouts 200]

The spans are the workload's own (the benchmark's agent, recorded with OpenTelemetry's in-memory
exporter). Stages, in the order a span passes them: the tracer writes the OpenTelemetry span's SpanAdded
bytes (`write`: `tracer.span_bytes`, the event id and framing included); Kafka carries it (see the raw producer
figure); the store reads its keys (`decode`: `decode_record(..., fold_only=True)`, the span itself stays
bytes), folds it with the reducers (`fold`: into an in-memory dict, the span's bytes as the view stores them)
and writes the result to RocksDB (`rocksdb`: what folding into RocksKV costs beyond folding into the dict). For
comparison, and not counted in the one-core rate: the tracer's record path (`convert`: the span to its Avro
record, `encode`: fastavro), which spans the direct writer does not cover still take; and the path before spans
were kept as bytes, a full decode (`full_decode`) and folding the decoded span (`fold_decoded`: the span model
serialized with orjson). Each figure is
the fastest of `PASSES` passes over the spans.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agl_events.bench.agl_side import run_plan
from agl_events.bench.workload import PRESETS
from agl_events.emitter import emit_reward, operation, set_active_provider
from agl_events.events.codec import AvroCodec
from agl_events.events.kinds import Kind
from agl_events.log.records import LoggedEvent, NewEvent, RawRecord, decode_record, new_event_id
from agl_events.topics import Topic
from agl_events.tracer.kafka import span_added
from agl_events.tracer.span_bytes import AttemptSpans
from agl_events.views.kv import DictKV, KeyValue
from agl_events.views.rocks import RocksKV
from agl_events.views.store_view import StoreView


def workload_agent(task: dict[str, Any]) -> None:
    """The benchmark's agent without its sleeps, its returned reward recorded as a runner records it."""
    emit_reward(run_plan({**task, "span_sleep": 0.0}, operation, emit_reward))


def record_otel_spans(tasks: list[dict[str, Any]], agent: Callable[[dict[str, Any]], Any] = workload_agent
                      ) -> list[list[ReadableSpan]]:
    """Each task's finished OpenTelemetry spans from `agent` (the workload's by default), as the runner's tracer
    would receive them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = set_active_provider(provider)
    rollouts: list[list[ReadableSpan]] = []
    try:
        for task in tasks:
            exporter.clear()
            agent(task)
            rollouts.append(list(exporter.get_finished_spans()))
    finally:
        set_active_provider(previous)
        provider.shutdown()
    return rollouts


def _route(n: int) -> tuple[str, str]:
    return f"ro-bench{n:06d}", f"at-bench{n:06d}"


def span_events(rollouts: list[list[ReadableSpan]], producer_id: str = "bench") -> list[NewEvent]:
    """SpanAdded events for the recorded spans, stamped as rollout n / attempt n, sequence ids 1, 2, ..."""
    return [span_added(span, *_route(n), seq, producer_id)
            for n, spans in enumerate(rollouts) for seq, span in enumerate(spans, start=1)]


def written_spans(codec: AvroCodec, rollouts: list[list[ReadableSpan]], producer_id: str = "bench") -> list[bytes]:
    """The recorded spans' event bytes as the tracer writes them (`tracer.span_bytes`, one writer per attempt)."""
    written = []
    for n, spans in enumerate(rollouts):
        writer = AttemptSpans(codec.header(Kind.SPAN_ADDED), *_route(n), producer_id)
        written += [writer.event(span, seq, new_event_id(), time.time()) for seq, span in enumerate(spans, start=1)]
    return written


T = TypeVar("T")

#: Passes per stage; the fastest counts. One pass on a machine whose load moves (other jobs on its cores) gave
#: figures twice apart from one run to the next; the minimum is what the stage costs when it has a core.
PASSES = 5


def _per_item_us(work: Callable[[], T], items: int, passes: int = PASSES) -> tuple[float, T]:
    """Microseconds per item of the fastest of `passes` runs of `work`, and what the last run returned."""
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - started)
    return best / items * 1e6, result


def _fold_all(kv: KeyValue, logged: list[LoggedEvent], batch: int = 500) -> None:
    view = StoreView(kv, track_own=False)
    for i in range(0, len(logged), batch):
        view.apply_logged(logged[i:i + batch])


def stage_costs(tasks: list[dict[str, Any]]) -> dict[str, float]:
    """Microseconds per span for each stage, and the resulting spans/s of one core doing all of them."""
    codec = AvroCodec()
    rollouts = record_otel_spans(tasks)
    count = sum(len(spans) for spans in rollouts)
    write, _ = _per_item_us(lambda: written_spans(codec, rollouts), count)
    convert, events = _per_item_us(lambda: span_events(rollouts), count)
    encode, payloads = _per_item_us(lambda: [codec.encode(e.kind, e.record) for e in events], count)
    decode, decoded = _per_item_us(lambda: [codec.decode(p) for p in payloads], count)
    logged = [LoggedEvent(d.name, e.key, d.record, f"agl.bench.{Topic.SPANS.value}", 0, offset)
              for offset, (d, e) in enumerate(zip(decoded, events, strict=True))]
    fold, _ = _per_item_us(lambda: _fold_all(DictKV(), logged), count)
    raws = [RawRecord(f"agl.bench.{Topic.SPANS.value}", 0, offset, e.key.encode(), p)
            for offset, (e, p) in enumerate(zip(events, payloads, strict=True))]
    read_keys, keyed = _per_item_us(lambda: [decode_record(codec, r, fold_only=True) for r in raws], count)
    fold_bytes, _ = _per_item_us(lambda: _fold_all(DictKV(), keyed), count)
    folder = Path(tempfile.mkdtemp(prefix="agl-bench-stages-"))
    try:
        rocks = RocksKV(folder)
        try:  # one pass: a second would fold into a view that already holds every span
            rocksdb = _per_item_us(lambda: _fold_all(rocks, keyed), count, passes=1)[0] - fold_bytes
        finally:
            rocks.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    costs = {"write": write, "decode": read_keys, "fold": fold_bytes, "rocksdb": max(rocksdb, 0.0)}
    figures = {f"stage_{name}_us": us for name, us in costs.items()}
    figures |= {"stage_convert_us": convert, "stage_encode_us": encode,  # the tracer's record path
                "stage_full_decode_us": decode, "stage_fold_decoded_us": fold}  # the path before spans as bytes
    figures["stage_spans"] = float(count)
    figures["stage_one_core_spans_per_s"] = 1e6 / sum(costs.values())
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rollouts", type=int, default=PRESETS["medium"].rollouts)
    args = parser.parse_args()
    params = PRESETS["medium"].model_copy(update={"rollouts": args.rollouts})
    figures = stage_costs(params.tasks())
    for name, value in figures.items():
        print(f"{name:32s} {value:12.1f}")
    print(json.dumps({k: round(v, 2) for k, v in figures.items()}))


if __name__ == "__main__":
    main()

"""The physical limit: how many SpanAdded records per second a bare producer loop gets into the broker.

The payloads are the benchmark's own spans, already Avro-encoded with our codec, so the figure is
what Kafka and librdkafka allow on this machine with our producer settings (acks=all, idempotence,
lz4, linger) and nothing else: no OpenTelemetry, no conversion, no encoding, no store. Our spans/s
divided by it says how much of the pipe the store actually uses.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from agl_events.bench.stages import record_otel_spans, span_events, workload_agent
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topic
from agl_events.log.clients import make_admin, make_producer


def encode_span_payloads(tasks: list[dict[str, Any]], codec: AvroCodec | None = None,
                         agent: Callable[[dict[str, Any]], Any] = workload_agent) -> list[tuple[bytes, bytes]]:
    """(key, value) per span of `tasks` run by `agent` (the workload's by default), encoded exactly as the tracer
    would put them on the spans topic."""
    codec = codec or AvroCodec()
    return [(new.key.encode(), codec.encode(new.kind, new.record))
            for new in span_events(record_otel_spans(tasks, agent), "bench-raw")]


def raw_produce_per_s(bootstrap: str, payloads: list[tuple[bytes, bytes]], messages: int,
                      partitions: int = 3, **producer_overrides: Any) -> dict[str, float]:
    """Send `messages` records (cycling through `payloads`) to a throwaway topic; deleted afterwards.
    `producer_overrides` change our producer settings (e.g. the local queue's bound, to compare).

    Timed from a producer already connected (one record sent and acknowledged first): before session 16 the
    clock ran through connecting and the idempotent producer's id, about half a second, which made 20,000 spans
    look like 36,000 records/s where the pipe takes several times that."""
    admin = make_admin(bootstrap)
    topic = f"agl-bench-raw-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, partitions)
    try:
        producer = make_producer(bootstrap, "bench-raw", **producer_overrides)
        errors: list[Any] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        warm_key, warm_value = payloads[0]  # connecting and the idempotent producer's id: ~0.5 s, not the rate
        producer.produce(topic, value=warm_value, key=warm_key, on_delivery=on_delivery)
        producer.flush(30)
        sent_bytes = 0
        started = time.perf_counter()
        for i in range(messages):
            key, value = payloads[i % len(payloads)]
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
            sent_bytes += len(value)
            if i % 1000 == 0:
                producer.poll(0)
        remaining = producer.flush(60)
        seconds = time.perf_counter() - started
        if remaining or errors:
            raise RuntimeError(f"raw producer lost {remaining} in flight, {len(errors)} errors: {errors[:1]}")
    finally:
        for future in admin.delete_topics([topic], operation_timeout=30).values():
            future.result()
    return {"raw_produce_per_s": messages / seconds, "raw_mb_per_s": sent_bytes / seconds / 1e6,
            "raw_messages": float(messages), "raw_avg_bytes": sent_bytes / messages}

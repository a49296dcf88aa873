"""The physical limit: how many SpanAdded records per second a bare producer loop gets into the broker.

The payloads are the benchmark's own spans, already Avro-encoded with our codec, so the figure is
what Kafka and librdkafka allow on this machine with our producer settings (acks=all, idempotence,
lz4, linger) and nothing else: no OpenTelemetry, no conversion, no encoding, no store. Our spans/s
divided by it says how much of the pipe the store actually uses.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agl_events.bench.agl_side import run_plan
from agl_events.emitter import emit_reward, operation, set_active_provider
from agl_events.events.codec import AvroCodec
from agl_events.events.convert import span_record
from agl_events.log.clients import make_admin, make_producer
from agl_events.log.records import event
from agl_events.tracer.convert import span_from_otel
from agl_events.tracer.kafka import _untupled, _with_route


def encode_span_payloads(tasks: list[dict[str, Any]], codec: AvroCodec | None = None) -> list[tuple[bytes, bytes]]:
    """(key, value) per span of `tasks`, encoded exactly as the tracer would put them on the spans topic."""
    codec = codec or AvroCodec.from_url(None)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    payloads: list[tuple[bytes, bytes]] = []
    previous = set_active_provider(provider)
    try:
        for n, task in enumerate(tasks):
            exporter.clear()
            final = run_plan({**task, "span_sleep": 0.0}, operation, emit_reward)
            emit_reward(final)  # what the runner records from the returned float
            spans: tuple[ReadableSpan, ...] = exporter.get_finished_spans()
            rid, aid = f"ro-raw{n:06d}", f"at-raw{n:06d}"
            for seq, otel_span in enumerate(spans, start=1):
                span = _with_route(span_from_otel(otel_span, rid, aid, seq))
                new = event("SpanAdded", rid, time.time(), "bench-raw", span=span_record(_untupled(span.model_dump())))
                payloads.append((rid.encode(), codec.encode(new.kind, new.record)))
    finally:
        set_active_provider(previous)
        provider.shutdown()
    return payloads


def raw_produce_per_s(bootstrap: str, payloads: list[tuple[bytes, bytes]], messages: int,
                      partitions: int = 3) -> dict[str, float]:
    """Send `messages` records (cycling through `payloads`) to a throwaway topic; deleted afterwards."""
    admin = make_admin(bootstrap)
    topic = f"agl-bench-raw-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result()
    try:
        producer = make_producer(bootstrap, "bench-raw")
        errors: list[Any] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

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
            raise KafkaException(f"raw producer lost {remaining} in flight, {len(errors)} errors: {errors[:1]}")
    finally:
        for future in admin.delete_topics([topic], operation_timeout=30).values():
            future.result()
    return {"raw_produce_per_s": messages / seconds, "raw_mb_per_s": sent_bytes / seconds / 1e6,
            "raw_messages": float(messages), "raw_avg_bytes": sent_bytes / messages}

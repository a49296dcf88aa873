"""Sequence ids past a claim's block: the tracer reserves blocks that double, so a long attempt stops for few of them.

Each reservation is a blocking store call on the agent's thread (and a Kafka append in the store); at one block of
the claim's size (32) per 32 spans, a thousand-span attempt stopped 31 times, most of its time in `bench.runners`.
"""

from __future__ import annotations

from agl_events.emitter import operation
from agl_events.log.memory import InMemoryLog
from agl_events.topics import Topic
from agl_events.tracer.kafka import MAX_RESERVED_BLOCK, KafkaTracer, ReservedIds


def test_a_thousand_spans_past_a_claims_block_reserve_five_growing_blocks() -> None:
    log = InMemoryLog(producer_id="tracer-unit")
    tracer = KafkaTracer(log)
    counter = 32  # the claim reserved 1-32; the store's counter moves on as others reserve too
    calls: list[int] = []

    def more(count: int = 32) -> int:
        nonlocal counter
        calls.append(count)
        first, counter = counter + 100 + 1, counter + 100 + count  # another attempt took 100 ids in between
        return first

    try:
        with tracer.trace_context("ro-1", "at-1", first_sequence_id=1, reserved=ReservedIds(32, more)):
            for step in range(1000):
                with operation(step=step):
                    pass
    finally:
        tracer.close()
    assert calls == [64, 128, 256, 512, MAX_RESERVED_BLOCK]
    ids = [e.record["span"]["sequence_id"] for e in log.topics[Topic.SPANS.value]]
    blocks, first = [range(1, 33)], 33
    for count in calls:
        first += 100
        blocks.append(range(first, first + count))
        first += count
    assert ids == [i for block in blocks for i in block][:1000]  # each block used in order, none twice

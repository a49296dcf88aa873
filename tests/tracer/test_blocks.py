"""Sequence ids past a claim's block: the tracer reserves blocks that double, so a long attempt stops for few of them.

Each reservation is a blocking store call on the agent's thread (and a Kafka append in the store); at one block of
the claim's size (32) per 32 spans, a thousand-span attempt stopped 31 times, most of its time in `bench.runners`.
"""

from __future__ import annotations

import threading

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


def test_a_blocking_reservation_stalls_only_its_own_attempt() -> None:
    """Each attempt numbers and queues its spans under its own lock: while one slot's thread waits for the store
    to reserve its next block, another slot's spans still go out (under the processor's one lock they waited)."""
    log = InMemoryLog(producer_id="tracer-unit")
    tracer = KafkaTracer(log)
    reserving, other_queued = threading.Event(), threading.Event()
    seen_while_reserving: list[bool] = []

    def slow_more(count: int) -> int:
        reserving.set()
        seen_while_reserving.append(other_queued.wait(timeout=10))
        return 100

    def attempt_a() -> None:
        with tracer.trace_context("ro-a", "at-a", first_sequence_id=1, reserved=ReservedIds(1, slow_more)):
            for step in range(2):  # the second span needs a new block
                with operation(step=step):
                    pass

    def attempt_b() -> None:
        reserving.wait(timeout=10)
        with tracer.trace_context("ro-b", "at-b", first_sequence_id=1), operation(step=0):
            pass
        other_queued.set()

    threads = [threading.Thread(target=attempt_a), threading.Thread(target=attempt_b)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        tracer.close()
    assert seen_while_reserving == [True]
    spans = [(e.record["span"]["rollout_id"], e.record["span"]["sequence_id"]) for e in log.topics[Topic.SPANS.value]]
    assert spans == [("ro-a", 1), ("ro-b", 1), ("ro-a", 100)]

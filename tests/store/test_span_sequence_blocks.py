"""Span sequence ids of a rollout's attempts never collide, even while an earlier attempt's spans are in flight.

The defect this guards (found by the long cluster chaos run, docs/reliability.md): a first attempt stalled
through a leader failover, was declared unresponsive and retried; its spans, numbered 1-4 by its runner's
tracer, were still in that runner's producer, so the store's counter was still 0 and the second attempt was
told to number from 1 as well. A claim now reserves a block of ids for its attempt, so the next claim starts
above it whether or not the spans arrived.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.events.typed import span_of
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.records import EncodedEvent, NewEvent
from agl_events.log.sink import AppendError, Delivered
from agl_events.log.writer import EventWriter
from agl_events.reducers import keys
from agl_events.store.commands.attempts import update_attempt
from agl_events.store.commands.rollouts import enqueue_rollout
from agl_events.store.commands.spans import allocate_sequence_ids
from agl_events.store.commands.tasks import CLAIM_SEQUENCE_BLOCK, claim
from agl_events.store.context import DecisionContext
from agl_events.store.kafka import KafkaLightningStore
from agl_events.tracer import KafkaTracer, ReservedIds
from agl_events.types import Claim, EnqueueRolloutRequest, RolloutConfig
from tests.eventually import eventually_async
from tests.store import DictView, make_span

RETRIED = RolloutConfig(max_attempts=3, retry_condition=["unresponsive"])


def test_each_claim_reserves_a_block_above_the_previous_attempts() -> None:
    """Pure decision: no span of attempt 1 has reached the view, yet attempt 2's ids start above its block, and
    a block attempt 1 reserves later starts above attempt 2's."""
    ctx = DecisionContext(DictView(), now=1.0, producer_id="store-1")
    rid = enqueue_rollout(ctx, {"q": 1}, config=RETRIED)["rollout_id"]
    first = claim(ctx, rid, "runner-1")
    assert first is not None
    assert (first.next_sequence_id, first.reserved_through) == (1, CLAIM_SEQUENCE_BLOCK)
    reservation = next(e for e in ctx.events if e.kind == "SpanSequenceReserved")
    assert reservation.record["sequence_id"] == CLAIM_SEQUENCE_BLOCK
    assert reservation.record["attempt_id"] == first.rollout.attempt.attempt_id

    update_attempt(ctx, rid, first.rollout.attempt.attempt_id, status="unresponsive", cause="watchdog")
    second = claim(ctx, rid, "runner-2")
    assert second is not None and second.rollout.attempt.sequence_id == 2
    assert (second.next_sequence_id, second.reserved_through) == (CLAIM_SEQUENCE_BLOCK + 1, 2 * CLAIM_SEQUENCE_BLOCK)
    assert ctx.get(keys.span_counter(rid)) == 2 * CLAIM_SEQUENCE_BLOCK
    assert allocate_sequence_ids(ctx, [(rid, first.rollout.attempt.attempt_id)] * 3) == [
        2 * CLAIM_SEQUENCE_BLOCK + 1, 2 * CLAIM_SEQUENCE_BLOCK + 2, 2 * CLAIM_SEQUENCE_BLOCK + 3]


class _HeldSink:
    """A writer that stamps and keeps what it is sent until `release`: spans a runner's producer still holds
    (through a leader failover, in the run that found the defect)."""

    def __init__(self, writer: EventWriter) -> None:
        self.writer = writer
        self.held: list[tuple[Sequence[EncodedEvent], Callable[[Delivered | AppendError], None]]] = []

    @property
    def producer_id(self) -> str:
        return self.writer.producer_id

    @property
    def codec(self) -> AvroCodec:
        return self.writer.codec

    def encode(self, new: NewEvent) -> bytes:
        return self.writer.encode(new)

    def append(self, events: Any) -> Any:
        return self.writer.append(events)

    def send(self, events: Sequence[EncodedEvent], on_delivery: Callable[[Delivered | AppendError], None]) -> None:
        self.held.append((events, on_delivery))

    def release(self) -> None:
        for events, on_delivery in self.held:
            self.writer.send(events, on_delivery)
        self.held.clear()

    def flush(self, timeout: float = 30.0) -> None:
        self.writer.flush(timeout)

    def close(self) -> None:
        return None


def _no_more_ids(count: int) -> int:
    raise AssertionError("four spans fit the claim's block: no call to the store for ids")


def _reserved(claimed: Claim) -> ReservedIds:
    return ReservedIds(claimed.reserved_through, _no_more_ids)


@pytest.mark.kafka
async def test_a_retried_attempt_never_reuses_the_ids_of_spans_still_in_flight(
        settings: Settings, bootstrap: str, experiment: str, tmp_path: Path) -> None:
    create_topics(make_admin(bootstrap), experiment)
    writer = EventWriter(bootstrap, experiment, AvroCodec(), producer_id="runner-test")
    held = _HeldSink(writer)
    stalled, prompt = KafkaTracer(held), KafkaTracer(writer)
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        [rollout] = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"q": 1}, config=RETRIED)])
        rid = rollout.rollout_id
        first = await store.claim_rollout(rid, "runner-1")
        assert first is not None
        # The first attempt's runner numbers four spans from its claim; its producer still holds them.
        one = stalled.processor.begin(rid, first.rollout.attempt.attempt_id, first.next_sequence_id,
                                      reserved=_reserved(first))
        for i in range(4):
            stalled.processor.submit(lambda r, a, n, i=i: span_of(make_span(r, a, n, name=f"first-{i}").model_dump()))
        stalled.processor.end(one)
        assert len(held.held) == 4

        await store.update_attempt(rid, first.rollout.attempt.attempt_id, status="unresponsive")  # the watchdog
        second = await store.claim_rollout(rid, "runner-2")
        assert second is not None and second.rollout.attempt.sequence_id == 2
        otel = prompt.get_tracer()
        with prompt.trace_context(rid, second.rollout.attempt.attempt_id, second.next_sequence_id,
                                  reserved=_reserved(second)):  # flushed on exit
            for i in range(4):
                otel.start_span(f"second-{i}").end()
        held.release()  # the first attempt's spans arrive after the second's
        stalled.processor.flush(attempt=one)

        async def spans() -> list[Any]:
            return list(await store.query_spans(rid))

        found = await eventually_async(spans, "both attempts' eight spans in the view", until=lambda s: len(s) == 8)
        by_attempt = {a.attempt_id: sorted(s.sequence_id for s in found if s.attempt_id == a.attempt_id)
                      for a in (first.rollout.attempt, second.rollout.attempt)}
        assert len({s.sequence_id for s in found}) == 8, by_attempt
        assert by_attempt[first.rollout.attempt.attempt_id] == [1, 2, 3, 4]
        assert by_attempt[second.rollout.attempt.attempt_id] == list(range(CLAIM_SEQUENCE_BLOCK + 1,
                                                                           CLAIM_SEQUENCE_BLOCK + 5))
    finally:
        await store.close()
        stalled.close()
        prompt.close()
        writer.close()

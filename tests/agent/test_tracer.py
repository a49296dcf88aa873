"""KafkaTracer on the real broker: spans land as SpanAdded events, in order, durable on exit, and
upstream's adapters read them as if upstream's own store had kept them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from agl_events.config import Settings
from agl_events.emitter import emit_message, emit_reward, operation
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.reader import EventReader
from agl_events.log.writer import EventWriter
from agl_events.runner.results import record_result
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import Topic
from agl_events.tracer import KafkaTracer, ReservedIds, SpanFlushError, span_from_otel
from agl_events.types import AttemptedRollout, Span
from tests.agent import read_spans
from tests.eventually import eventually_async

pytestmark = pytest.mark.kafka

LLM_CALL = {
    "gen_ai.request.model": "tiny", "gen_ai.response.id": "resp-1",
    "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "2+2?",
    "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "4",
    "prompt_token_ids": [11, 12, 13], "response_token_ids": [21, 22],
}


@pytest.fixture
def writer(bootstrap: str, experiment: str) -> Iterator[EventWriter]:
    create_topics(make_admin(bootstrap), experiment)
    writer = EventWriter(bootstrap, experiment, AvroCodec(), producer_id="tracer-test")
    yield writer
    writer.close()


@pytest.fixture
def tracer(writer: EventWriter) -> Iterator[KafkaTracer]:
    tracer = KafkaTracer(writer)
    yield tracer
    tracer.close()



def test_spans_shared_with_another_writer_take_the_stores_ids(tracer: KafkaTracer) -> None:
    """With `reserve` (a rollout whose LLM calls the proxy records) each span takes the store's next id, never
    one below its own last, and keeps a local one when the store cannot be asked."""
    issued = iter([1, 7, 9])  # 1: the store has not folded earlier spans yet; 4-6 and 8: the proxy took them

    def reserve() -> int:
        if (value := next(issued, None)) is None:
            raise ConnectionError("store down")
        return value

    with tracer.trace_context("ro-shared", "at-1", first_sequence_id=3, reserve=reserve):
        for step in range(4):
            with operation(step=step):
                pass
    assert [s.sequence_id for s in tracer.get_last_trace()] == [3, 7, 9, 10]


def test_past_its_reserved_block_an_attempt_reserves_the_next_one_in_one_call(tracer: KafkaTracer) -> None:
    """A claim's block (here ids 5-7) numbers spans with no call; past it one call reserves a block of twice as
    many (here from 20: another attempt took 8-19); a block that cannot be had fails the flush instead of numbering
    spans with ids another attempt may hold."""
    blocks = iter([20])
    calls: list[int] = []

    def more(count: int) -> int:
        calls.append(count)
        if (first := next(blocks, None)) is None:
            raise ConnectionError("store down")
        return first

    with tracer.trace_context("ro-blocks", "at-1", first_sequence_id=5, reserved=ReservedIds(7, more)):
        for step in range(6):
            with operation(step=step):
                pass
    assert [s.sequence_id for s in tracer.get_last_trace()] == [5, 6, 7, 20, 21, 22] and calls == [6]

    with pytest.raises(SpanFlushError), tracer.trace_context("ro-blocks", "at-2", first_sequence_id=23,
                                                              reserved=ReservedIds(23, more)):
        for step in range(2):
            with operation(step=step):
                pass
    assert [s.sequence_id for s in tracer.get_last_trace()] == [23]

def test_spans_reach_the_log_in_order_and_upstream_adapters_find_the_reward(
        tracer: KafkaTracer, bootstrap: str, experiment: str) -> None:
    from agentlightning.adapter import TracerTraceToTriplet
    from agentlightning.emitter import find_final_reward
    from agentlightning.types import Span as UpstreamSpan

    otel = tracer.get_tracer()
    with tracer.trace_context("ro-1", "at-1", first_sequence_id=7):
        with otel.start_as_current_span("agent.run"):
            with operation(name="plan"):
                emit_message("thinking")
            with otel.start_as_current_span("openai.chat.completion", attributes=LLM_CALL):
                pass
            worker = threading.Thread(target=lambda: otel.start_span("background").end())
            worker.start()  # a span ended on another thread, outside this context's OTel context
            worker.join()
        emit_reward(0.75)
    local = tracer.get_last_trace()
    assert [s.name for s in local] == ["agentlightning.message", "agentlightning.operation",
                                       "openai.chat.completion", "background", "agent.run",
                                       "agentlightning.annotation"]
    assert tracer.last_sequence_id == 7 + len(local) - 1

    events, spans = read_spans(bootstrap, experiment, len(local))  # no extra flush: the exit flushed
    assert {e.kind for e in events} == {"SpanAdded"} and {e.key for e in events} == {"ro-1"}
    assert [s["sequence_id"] for s in spans] == list(range(7, 7 + len(local)))
    assert {(s["rollout_id"], s["attempt_id"]) for s in spans} == {("ro-1", "at-1")}
    assert [s["name"] for s in spans] == [s.name for s in local]
    by_id = {s["span_id"]: s for s in spans}
    root = spans[4]
    assert root["parent_id"] is None and spans[5]["parent_id"] is None
    assert by_id[spans[0]["parent_id"]]["name"] == "agentlightning.operation"
    assert spans[1]["parent_id"] == spans[2]["parent_id"] == root["span_id"]
    assert spans[2]["attributes"]["prompt_token_ids"] == [11, 12, 13]
    assert root["resource"]["attributes"]["agentlightning.rollout_id"] == "ro-1"
    assert [Span.model_validate(s) for s in spans] == local

    upstream = [UpstreamSpan.model_validate(s) for s in spans]
    assert find_final_reward(upstream) == 0.75
    triplets = TracerTraceToTriplet().adapt(upstream)
    assert len(triplets) == 1
    assert triplets[0].reward == 0.75
    assert triplets[0].prompt["token_ids"] == [11, 12, 13]
    assert triplets[0].response["token_ids"] == [21, 22]
    assert triplets[0].metadata["response_id"] == "resp-1"


def test_conversion_matches_upstream_from_opentelemetry() -> None:
    """Same fields as upstream's `Span.from_opentelemetry`, including links, events and status."""
    from agentlightning.types import Span as UpstreamSpan
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = provider.get_tracer("t")
    with otel.start_as_current_span("parent") as parent, otel.start_as_current_span(
            "child", links=[Link(parent.get_span_context(), {"why": "x"})],
            attributes={"tags": ["a", "b"], "n": 3}) as child:
        child.add_event("step", {"i": 1})
        child.set_status(StatusCode.ERROR, "bad")
    for span in exporter.get_finished_spans():
        ours = span_from_otel(span, "ro", "at", 3).model_dump(mode="json")  # JSON: tuples as lists
        theirs = UpstreamSpan.from_opentelemetry(span, "ro", "at", 3).model_dump(mode="json")
        assert ours == theirs


def test_flush_raises_when_kafka_cannot_take_the_spans(experiment: str) -> None:
    dead = EventWriter("127.0.0.1:1", experiment, AvroCodec(), producer_id="nowhere",
                       **{"message.timeout.ms": 1500, "socket.connection.setup.timeout.ms": 1000})
    tracer = KafkaTracer(dead, flush_timeout=20)
    try:
        with pytest.raises(SpanFlushError, match="not written to Kafka"), tracer.trace_context("ro-x", "at-x", 1):
            emit_reward(1.0)
        # a failing body wins over the flush error, which is logged
        with pytest.raises(ZeroDivisionError), tracer.trace_context("ro-x", "at-y", 2):
            emit_reward(0.0)
            _ = 1 / 0
        tracer.flush(5)  # failures are reported once, then cleared
    finally:
        tracer.provider.shutdown()
        dead.close()


def test_a_thousand_spans_stream_without_a_round_trip_each(tracer: KafkaTracer, bootstrap: str,
                                                           experiment: str) -> None:
    otel = tracer.get_tracer()
    n = 1000
    with tracer.trace_context("ro-bulk", "at-1", 1):
        started = time.perf_counter()
        for i in range(n):
            with otel.start_as_current_span("step", attributes={"i": i, "payload": "x" * 200}):
                pass
        queued = time.perf_counter() - started
        tracer.flush()
        durable = time.perf_counter() - started
    print(f"\n{n} spans: queued in {queued * 1000:.0f} ms ({n / queued:,.0f}/s), "
          f"acknowledged after {durable * 1000:.0f} ms ({n / durable:,.0f}/s)")
    events, spans = read_spans(bootstrap, experiment, n)
    assert len(events) == n
    assert [s["sequence_id"] for s in spans] == list(range(1, n + 1))
    assert sorted(s["attributes"]["i"] for s in spans) == list(range(n))


def test_one_attempt_at_a_time_and_nothing_outside(tracer: KafkaTracer, bootstrap: str, experiment: str) -> None:
    otel = tracer.get_tracer()
    otel.start_span("before").end()
    with tracer.trace_context("ro-2", "at-1", 1):
        with pytest.raises(RuntimeError, match="one attempt at a time"):
            tracer.trace_context("ro-3", "at-1", 1).__enter__()
        otel.start_span("inside").end()
    otel.start_span("after").end()
    tracer.flush()
    _, spans = read_spans(bootstrap, experiment, 1)
    assert [s["name"] for s in spans] == ["inside"]
    assert tracer.last_sequence_id == 1


def test_async_context_and_successive_attempts(tracer: KafkaTracer, bootstrap: str, experiment: str) -> None:
    async def attempt(aid: str, first: int) -> int | None:
        async with tracer.trace_context("ro-4", aid, first):
            await asyncio.sleep(0)
            emit_reward(0.5)
            emit_message(aid)
        return tracer.last_sequence_id

    assert asyncio.run(attempt("at-1", 1)) == 2
    assert asyncio.run(attempt("at-2", 3)) == 4
    _, spans = read_spans(bootstrap, experiment, 4)
    assert [(s["attempt_id"], s["sequence_id"]) for s in spans] == [("at-1", 1), ("at-1", 2), ("at-2", 3),
                                                                     ("at-2", 4)]


def test_concurrent_attempts_each_keep_their_spans(tracer: KafkaTracer, bootstrap: str, experiment: str) -> None:
    """A runner running rollouts at once: each task (and the thread its sync agent runs on) numbers and
    flushes its own attempt's spans; a span ended outside every context is dropped while several run."""
    both_inside = threading.Barrier(2)

    def agent(name: str) -> None:
        with operation(name=name):
            both_inside.wait(5)  # both attempts are active at once from here
            if name == "ro-a":  # a thread started by hand carries no context: whose span would it be?
                lost = threading.Thread(target=lambda: tracer.get_tracer().start_span("lost").end())
                lost.start()
                lost.join()
            both_inside.wait(5)
            emit_reward(1.0)

    async def attempt(rid: str, first: int) -> tuple[list[Span], dict[int, int]]:
        context = tracer.trace_context(rid, "at-1", first)
        async with context:
            await asyncio.to_thread(agent, rid)
            spans = tracer.get_last_trace()
        return spans, context.spans_through()

    async def both() -> list[tuple[list[Span], dict[int, int]]]:
        return list(await asyncio.gather(attempt("ro-a", 1), attempt("ro-b", 10)))

    (spans_a, through_a), (spans_b, through_b) = asyncio.run(both())
    assert [(s.rollout_id, s.sequence_id) for s in spans_a] == [("ro-a", 1), ("ro-a", 2)]
    assert [(s.rollout_id, s.sequence_id) for s in spans_b] == [("ro-b", 10), ("ro-b", 11)]
    assert sum(through_a.values()) > 0 and sum(through_b.values()) > 0
    _, logged = read_spans(bootstrap, experiment, 4)
    assert sorted((s["rollout_id"], s["sequence_id"]) for s in logged) == [("ro-a", 1), ("ro-a", 2), ("ro-b", 10),
                                                                           ("ro-b", 11)]
    assert not tracer.processor.active and tracer.processor.concurrent == 0


def test_returned_values_become_spans(tracer: KafkaTracer, bootstrap: str, experiment: str) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    elsewhere = TracerProvider()
    elsewhere.add_span_processor(SimpleSpanProcessor(exporter))
    elsewhere.get_tracer("user").start_span("user.readable").end()
    readable = list(exporter.get_finished_spans())
    foreign = span_from_otel(readable[0], "other-rollout", "other-attempt", 99).model_copy(update={"name": "user.span"})
    from agl_events.emitter import SpanCoreFields
    from agl_events.types import TraceStatus

    core = SpanCoreFields(name="core", attributes={"k": "v"}, start_time=time.time(), end_time=time.time(),
                          status=TraceStatus(status_code="OK"))
    with tracer.trace_context("ro-5", "at-1", 10):
        record_result(tracer, None)
        assert tracer.get_last_trace() == []
        record_result(tracer, 0.5)
        record_result(tracer, 1)
        record_result(tracer, [foreign])
        record_result(tracer, readable)
        record_result(tracer, [core])
        spans = tracer.get_last_trace()
        with pytest.raises(ValueError, match="Invalid"):
            record_result(tracer, "text")
    assert [(s.name, s.sequence_id) for s in spans] == [
        ("agentlightning.annotation", 10), ("agentlightning.annotation", 11), ("user.span", 12),
        ("user.readable", 13), ("core", 14)]
    _, logged = read_spans(bootstrap, experiment, 5)
    assert [s["name"] for s in logged] == [s.name for s in spans]
    assert {(s["rollout_id"], s["attempt_id"]) for s in logged} == {("ro-5", "at-1")}
    assert logged[2]["span_id"] == foreign.span_id  # produced as given, only re-stamped
    assert logged[4]["status"]["status_code"] == "OK" and logged[4]["attributes"] == {"k": "v"}
    with pytest.raises(RuntimeError, match="active trace_context"):
        record_result(tracer, 1.0)




async def test_store_reads_a_runners_spans_up_to_its_offsets_and_takes_them_as_heartbeats(
        settings: Settings, tmp_path: Path) -> None:
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", scan_debounce_seconds=0)
    writer = EventWriter(settings.bootstrap_servers, settings.experiment, AvroCodec(), producer_id="runner-x")
    tracer = KafkaTracer(writer)
    try:
        await store.enqueue_rollout(input="a")
        second = await store.enqueue_rollout(input="b")
        dequeued = await store.dequeue_rollout(worker_id="w")  # over REST: preparing until its first span
        assert dequeued is not None and dequeued.attempt.status == "preparing"
        events_before = len(await asyncio.to_thread(read_kinds, settings))

        async def run(rollout: AttemptedRollout) -> None:
            with tracer.trace_context(rollout.rollout_id, rollout.attempt.attempt_id):
                emit_reward(1.0)
            through = tracer.spans_through()
            assert sum(through.values()) > 0  # the rollout's partition, past its one span
            finished = await store.finish_attempt(rollout.rollout_id, rollout.attempt.attempt_id, "succeeded",
                                                  through)
            assert finished.status == "succeeded"  # and its span is already readable:
            assert [s.name for s in await store.query_spans(rollout.rollout_id)] == ["agentlightning.annotation"]

        await run(dequeued)
        claimed = await store.claim_rollout(second.rollout_id, worker_id="w")
        assert claimed is not None and claimed.rollout.attempt.status == "running"
        await run(claimed.rollout)
        kinds: list[str] = []

        async def heartbeat_logged() -> bool:
            """The follower decides heartbeats after folding, off the finish's path: wait for the decision."""
            kinds[:] = (await asyncio.to_thread(read_kinds, settings))[events_before:]
            return "AttemptHeartbeat" in kinds

        await eventually_async(heartbeat_logged, "the preparing attempt's heartbeat in the log")
        # The preparing attempt's span is its heartbeat; the claimed one ran with a fresh heartbeat: none.
        assert kinds.count("AttemptHeartbeat") == 1, kinds
        revived = (await store.query_attempts(dequeued.rollout_id)).items[0]
        assert revived.last_heartbeat_time is not None
    finally:
        tracer.close()
        writer.close()
        await store.close()


def read_kinds(settings: Settings) -> list[str]:
    """Every event kind on the attempts topic, in log order."""
    codec = AvroCodec()
    reader = EventReader(settings.bootstrap_servers, settings.experiment, codec, [Topic.ATTEMPTS])
    try:
        reader.assign()
        targets = reader.end_offsets()
        kinds: list[str] = []
        while not reader.caught_up_to(targets):
            kinds.extend(e.kind for e in reader.poll(1000, 0.5))
        return kinds
    finally:
        reader.close()

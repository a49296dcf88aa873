"""What an agent returns becomes spans, and nothing else: the runner gets no span models back.

`record_result` returned the attempt's spans as pydantic models after every rollout, which the runner threw
away: for `span_burst`'s thousand spans that was 16% of a runner's CPU (`bench.runners --profile`)."""

from __future__ import annotations

from agl_events.log.memory import InMemoryLog
from agl_events.runner.results import record_result
from agl_events.topics import Topic
from agl_events.tracer.kafka import KafkaTracer


def test_a_result_is_produced_as_spans_and_no_models_come_back() -> None:
    log = InMemoryLog(producer_id="runner-unit")
    tracer = KafkaTracer(log)
    try:
        with tracer.trace_context("ro-1", "at-1", first_sequence_id=3):
            otel = tracer.get_tracer()
            otel.start_span("agent.step").end()
            returned = record_result(tracer, 0.5)
        assert returned is None
        spans = [e.record["span"] for e in log.topics[Topic.SPANS.value]]
        assert [(s["name"], s["sequence_id"]) for s in spans] == [("agent.step", 3), ("agentlightning.annotation", 4)]
        assert [s.name for s in tracer.get_last_trace()] == ["agent.step", "agentlightning.annotation"]
    finally:
        tracer.close()

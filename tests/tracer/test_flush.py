"""When an attempt ends, the tracer sends its spans at once only if no other attempt is being traced or about to write
spans (`more_coming`): a flush sends everything the producer holds early, so with several attempts running (a
runner's slots) it would break up the batches the linger makes, and their acknowledgements come within the linger
anyway."""

from __future__ import annotations

import contextvars

from agl_events.log.memory import InMemoryLog
from agl_events.topics import Topic
from agl_events.tracer.kafka import KafkaTracer


class _CountingLog(InMemoryLog):
    """The in-memory log (deliveries at once, as a producer's poll thread serves them), counting flushes."""

    def __init__(self) -> None:
        super().__init__(producer_id="tracer-unit")
        self.flushes = 0

    def flush(self, timeout: float = 30.0) -> None:
        self.flushes += 1


def test_an_attempt_ending_beside_another_leaves_sending_to_the_linger_and_the_last_one_sends() -> None:
    log = _CountingLog()
    tracer = KafkaTracer(log)
    first, second = tracer.trace_context("ro-1", "at-1"), tracer.trace_context("ro-2", "at-2")
    in_first, in_second = contextvars.copy_context(), contextvars.copy_context()  # two slots' threads
    for context, scope in ((in_first, first), (in_second, second)):
        context.run(scope.__enter__)
        context.run(lambda: tracer.get_tracer().start_span("work").end())
    in_first.run(first.__exit__, None, None, None)
    assert log.flushes == 0  # the other attempt's spans are not pushed out early
    in_second.run(second.__exit__, None, None, None)
    assert log.flushes == 1  # nothing else traced: its spans go now
    assert [(e.key, e.record["span"]["sequence_id"]) for e in log.topics[Topic.SPANS.value]] == [("ro-1", 1),
                                                                                               ("ro-2", 1)]
    assert first.spans_through() == {0: 1} and second.spans_through() == {0: 2}


def test_an_attempt_ending_alone_while_more_spans_are_coming_leaves_sending_to_the_linger() -> None:
    """A runner's CPU-bound sync agents on 16 threads rarely overlap (one runs whole within its thread's turn at the
    GIL): each attempt ended alone and flushed, and spans left a few at a time. The runner says more are coming."""
    log = _CountingLog()
    others = [True]
    tracer = KafkaTracer(log, more_coming=lambda: others[0])
    for n in (1, 2):
        with tracer.trace_context(f"ro-{n}", f"at-{n}"):
            tracer.get_tracer().start_span("work").end()
    assert log.flushes == 0
    others[0] = False  # the runner's last rollout: its spans go now
    with tracer.trace_context("ro-3", "at-3") as traced:
        traced.get_tracer().start_span("work").end()
    assert log.flushes == 1
    assert [e.key for e in log.topics[Topic.SPANS.value]] == ["ro-1", "ro-2", "ro-3"]

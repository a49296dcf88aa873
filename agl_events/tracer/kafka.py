"""KafkaTracer: every finished OpenTelemetry span of an attempt becomes a SpanAdded event on Kafka.

Spans stream out while the agent runs (they are the attempt's heartbeats) without a round trip per
span: the processor queues each one on the shared idempotent producer and librdkafka batches them.
Durability is settled at the end, in `flush`, which waits for every acknowledgement (acks=all) and
raises if any span was lost, so a runner marks an attempt finished only once all its spans are in
the log. Sequence ids are assigned here, in the order spans end, starting at the id the caller
reserved, because Kafka offers no per-rollout counter and upstream adapters order by them. When someone
else writes spans of the same attempt meanwhile (the LLM proxy, which takes its ids from the store),
the caller passes `reserve` and every span takes the store's next id instead (upstream's way, a store
call per span), so both kinds interleave in the order they happened: `LlmProxyTraceToTriplet` matches
each reward to the LLM calls before it by sequence id alone.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from agl_events.emitter.spans import INSTRUMENTATION_NAME, set_active_provider
from agl_events.events.convert import span_record
from agl_events.log.records import LoggedEvent, NewEvent, event
from agl_events.log.writer import AppendError, EventWriter
from agl_events.semconv import LightningResourceAttributes
from agl_events.tracer.convert import otel_span_dict
from agl_events.types import Span

log = logging.getLogger(__name__)


class SpanFlushError(RuntimeError):
    """Some spans were not acknowledged by Kafka: the attempt's trace in the log is incomplete."""


@dataclass
class _Attempt:
    rollout_id: str
    attempt_id: str
    next_sequence_id: int
    reserve: Callable[[], int] | None = None

    def take_sequence_id(self) -> int:
        """The next id: local, or the store's (never below the local one, whose spans the store may not
        have folded yet) when ids are shared with another writer. A failed reservation falls back to the
        local id: the span is kept, its place among the other writer's may be off."""
        if self.reserve is not None:
            try:
                return max(self.next_sequence_id, self.reserve())
            except Exception as exc:
                log.warning("no sequence id from the store (%s); span numbered locally", exc)
        return self.next_sequence_id


class KafkaSpanProcessor(SpanProcessor):
    """Stamps and ships spans that end while an attempt is active; counts what is still unacknowledged.

    The active attempt lives here, not in a contextvar, so spans ended on any thread (tool pools,
    SDK callbacks) count for it; one attempt at a time per processor.
    """

    def __init__(self, writer: EventWriter) -> None:
        self._writer = writer
        self._order = threading.RLock()  # sequence id assignment and queueing happen in one step
        self._attempt: _Attempt | None = None
        self._last_sequence_id: int | None = None
        self._spans: list[dict[str, Any]] = []  # as produced; models only when asked for
        self._acks = threading.Condition()
        self._outstanding = 0
        self._failures: list[BaseException] = []
        self._through: dict[int, int] = {}
        self.produced = 0

    # -- attempt scope -------------------------------------------------------------------------
    def begin(self, rollout_id: str, attempt_id: str, first_sequence_id: int,
              reserve: Callable[[], int] | None = None) -> None:
        with self._order:
            if self._attempt is not None:
                raise RuntimeError(f"tracer is already tracing rollout {self._attempt.rollout_id} attempt "
                                   f"{self._attempt.attempt_id}; one attempt at a time per tracer")
            self._attempt = _Attempt(rollout_id, attempt_id, first_sequence_id, reserve)
            self._last_sequence_id = first_sequence_id - 1
            self._spans = []
        with self._acks:
            self._through = {}

    def end(self) -> None:
        with self._order:
            self._attempt = None

    @property
    def active(self) -> bool:
        return self._attempt is not None

    @property
    def last_sequence_id(self) -> int | None:
        return self._last_sequence_id

    def spans_through(self) -> dict[int, int]:
        """Per partition of the span topic, the offset just past the current attempt's last acknowledged span.

        After `flush` this covers every span of the attempt: the store waits until its view has read that
        far before it records the attempt finished, instead of asking the broker where each partition ends.
        """
        with self._acks:
            return dict(self._through)

    def spans(self) -> list[Span]:
        """The spans queued for the current (or last) attempt, in sequence order."""
        with self._order:
            return [Span.model_validate(span) for span in self._spans]

    # -- SpanProcessor -------------------------------------------------------------------------
    def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        """Must never raise (it runs inside user code's span.end()); failures surface in flush()."""
        ctx = span.get_span_context()
        if ctx is None or not ctx.trace_flags.sampled:
            return
        if self._attempt is None:
            log.debug("span %s ended outside a trace_context; not recorded", span.name)
            return
        try:
            self.submit(lambda rid, aid, seq: otel_span_dict(span, rid, aid, seq))
        except Exception as exc:  # already recorded as a failure
            log.debug("span %s not queued: %s", span.name, exc)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            self.flush(timeout_millis / 1000)
        except SpanFlushError:
            return False
        return True

    # -- producing -----------------------------------------------------------------------------
    def submit(self, build: Callable[[str, str, int], dict[str, Any]]) -> dict[str, Any]:
        """Stamp the next sequence id via `build(rollout_id, attempt_id, sequence_id)` (a span in the JSON
        shape of our `Span`) and queue the span.

        Raises (and records the failure for flush) when the span cannot even be queued.
        """
        with self._order:
            attempt = self._attempt
            if attempt is None:
                raise RuntimeError("no active trace_context: spans need a rollout and attempt")
            try:
                span = with_route(build(attempt.rollout_id, attempt.attempt_id, attempt.take_sequence_id()))
                new = span_event(span, self._writer.producer_id)
                with self._acks:
                    self._outstanding += 1
                try:
                    self._writer.send([new], self._delivered)
                except BaseException:
                    with self._acks:
                        self._outstanding -= 1
                        self._acks.notify_all()
                    raise
            except Exception as exc:
                with self._acks:
                    self._failures.append(exc)
                raise
            attempt.next_sequence_id = span["sequence_id"] + 1
            self._last_sequence_id = span["sequence_id"]
            self._spans.append(span)
            self.produced += 1
            return span

    def _delivered(self, result: LoggedEvent | AppendError) -> None:
        with self._acks:
            self._outstanding -= 1
            if isinstance(result, AppendError):
                self._failures.append(result)
            elif result.offset >= self._through.get(result.partition, 0):
                self._through[result.partition] = result.offset + 1
            self._acks.notify_all()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every span queued so far is acknowledged; SpanFlushError if any was lost or late."""
        deadline = time.monotonic() + timeout
        self._writer.flush(timeout)  # sends now rather than after linger; serves delivery callbacks
        with self._acks:
            while self._outstanding > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SpanFlushError(f"{self._outstanding} spans not acknowledged by Kafka within {timeout}s")
                self._acks.wait(remaining)
            failures, self._failures = self._failures, []
        if failures:
            raise SpanFlushError(f"{len(failures)} spans were not written to Kafka; first error: {failures[0]}"
                                 ) from failures[0]


def with_route(span: dict[str, Any]) -> dict[str, Any]:
    """Rollout and attempt ids in the resource as well, as upstream's OTLP path stamps them there."""
    attributes = {**span["resource"]["attributes"],
                  LightningResourceAttributes.ROLLOUT_ID.value: span["rollout_id"],
                  LightningResourceAttributes.ATTEMPT_ID.value: span["attempt_id"]}
    return {**span, "resource": {**span["resource"], "attributes": attributes}}


def span_event(span: dict[str, Any], producer_id: str) -> NewEvent:
    """The SpanAdded event of a span in the JSON shape of our `Span` (lists, not tuples)."""
    return event("SpanAdded", span["rollout_id"], time.time(), producer_id, span=span_record(span))


def span_added(src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int, producer_id: str) -> NewEvent:
    """The SpanAdded event the tracer produces for a finished OpenTelemetry span."""
    return span_event(with_route(otel_span_dict(src, rollout_id, attempt_id, sequence_id)), producer_id)


class TraceContext:
    """`with` / `async with` scope of one attempt; on exit it flushes, so spans are durable before the
    caller reports the attempt finished. A flush failure is raised unless the body already failed."""

    def __init__(self, tracer: KafkaTracer, rollout_id: str, attempt_id: str, first_sequence_id: int,
                 reserve: Callable[[], int] | None = None) -> None:
        self._tracer = tracer
        self._args = (rollout_id, attempt_id, first_sequence_id)
        self._reserve = reserve
        self._previous: trace.TracerProvider | None = None

    def __enter__(self) -> KafkaTracer:
        self._tracer.processor.begin(*self._args, self._reserve)
        self._previous = set_active_provider(self._tracer.provider)
        return self._tracer

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        set_active_provider(self._previous)
        self._tracer.processor.end()
        try:
            self._tracer.flush()
        except SpanFlushError:
            if exc is None:
                raise
            log.exception("spans of rollout %s attempt %s were lost while the attempt failed", *self._args[:2])

    async def __aenter__(self) -> KafkaTracer:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.__exit__, exc_type, exc, tb)


class KafkaTracer:
    """An OpenTelemetry TracerProvider whose spans go to the experiment's span topic.

    `writer` is shared (one idempotent producer per process) and stays owned by the caller.
    `install_global=True` also makes the provider OpenTelemetry's global one, so third-party
    instrumentation (OpenAI, LangChain, ...) reports into the rollout; emitters find it either way.
    """

    def __init__(self, writer: EventWriter, *, resource: Resource | None = None, install_global: bool = False,
                 flush_timeout: float = 30.0) -> None:
        self.writer = writer
        self.flush_timeout = flush_timeout
        self.processor = KafkaSpanProcessor(writer)
        self.provider = TracerProvider(resource=resource) if resource is not None else TracerProvider()
        self.provider.add_span_processor(self.processor)
        if install_global:
            if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
                raise RuntimeError("a global OpenTelemetry TracerProvider is already set; it can be set only once")
            trace.set_tracer_provider(self.provider)

    def trace_context(self, rollout_id: str, attempt_id: str, first_sequence_id: int = 1,
                      reserve: Callable[[], int] | None = None) -> TraceContext:
        """Trace one attempt: spans ending inside get sequence ids first_sequence_id, +1, ... , or each the
        id `reserve()` gives (when another writer, the LLM proxy, shares the rollout's ids)."""
        return TraceContext(self, rollout_id, attempt_id, first_sequence_id, reserve)

    def get_tracer(self, name: str = INSTRUMENTATION_NAME) -> trace.Tracer:
        """An OpenTelemetry tracer on this provider, for spans of your own."""
        return self.provider.get_tracer(name)

    @property
    def last_sequence_id(self) -> int | None:
        """The last sequence id assigned (first_sequence_id - 1 if none yet); None before any attempt."""
        return self.processor.last_sequence_id

    def spans_through(self) -> dict[int, int]:
        """Span-topic partition -> offset past the current (or last) attempt's acknowledged spans."""
        return self.processor.spans_through()

    def get_last_trace(self) -> list[Span]:
        """The spans produced for the current or last attempt (upstream's `Tracer.get_last_trace`)."""
        return self.processor.spans()

    def flush(self, timeout: float | None = None) -> None:
        """Return once Kafka acknowledged every span produced so far; SpanFlushError if any failed."""
        self.processor.flush(self.flush_timeout if timeout is None else timeout)

    def close(self) -> None:
        """Flush and shut the provider down; the writer is left to its owner."""
        try:
            self.flush()
        finally:
            self.provider.shutdown()

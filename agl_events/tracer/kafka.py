"""KafkaTracer: every finished OpenTelemetry span of an attempt becomes a SpanAdded event on Kafka.

Spans stream out while the agent runs (they are the attempt's heartbeats) without a round trip per
span: the processor queues each one on the shared idempotent producer and librdkafka batches them.
Durability is settled at the end, in `flush`, which waits for every acknowledgement (acks=all) and
raises if any span was lost, so a runner marks an attempt finished only once all its spans are in
the log. Sequence ids are assigned here, in the order spans end, from the block the caller reserved (a
runner's claim reserves one), because Kafka offers no per-rollout counter and upstream adapters order by
them; past the block the tracer reserves another from the store, one call per block, each block twice the last
(up to `MAX_RESERVED_BLOCK`): a blocking call on the agent's thread every 32 spans was most of the time a
thousand-span attempt took (each call a store round trip and a Kafka append). Reserved blocks keep
two attempts of a rollout apart even while one's spans are still in a producer. When someone
else writes spans of the same attempt meanwhile (the LLM proxy, which takes its ids from the store),
the caller passes `reserve` and every span takes the store's next id instead (upstream's way, a store
call per span), so both kinds interleave in the order they happened: `LlmProxyTraceToTriplet` matches
each reward to the LLM calls before it by sequence id alone.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from agl_events.emitter.spans import INSTRUMENTATION_NAME, set_active_provider
from agl_events.events.kinds import Kind
from agl_events.events.typed import Span as SpanRecord
from agl_events.events.typed import SpanAdded, span_model
from agl_events.log.encoding import checked
from agl_events.log.records import EncodedEvent, NewEvent, event, new_event_id
from agl_events.log.sink import AppendError, Delivered, EventSink
from agl_events.semconv import LightningResourceAttributes
from agl_events.tracer.convert import otel_span_record
from agl_events.tracer.span_bytes import AttemptSpans, NotCovered
from agl_events.types import Span

log = logging.getLogger(__name__)

T = TypeVar("T")


#: The most ids an attempt reserves in one call once its claim's block ran out (blocks double up to it): ids left
#: unused when the attempt ends are only a gap in the rollout's sequence, which orders spans and needs no density.
MAX_RESERVED_BLOCK = 1024


@dataclass(frozen=True)
class ReservedIds:
    """Sequence ids reserved for an attempt from its first one through `last` (a claim's block); once they run
    out, `more(count)` reserves `count` more and returns the first of them (a blocking store call)."""

    last: int
    more: Callable[[int], int]


class SpanFlushError(RuntimeError):
    """Some spans were not acknowledged by Kafka: the attempt's trace in the log is incomplete."""


@dataclass
class _Attempt:
    """One traced attempt: its numbering, the spans it queued, and their acknowledgements."""

    rollout_id: str
    attempt_id: str
    next_sequence_id: int
    encoder: AttemptSpans
    reserve: Callable[[], int] | None = None
    reserved: ReservedIds | None = None  # None: the caller's ids are the attempt's alone, without end
    block: int = 0  # how many ids `reserved` holds: the next `more()` reserves twice as many
    last_sequence_id: int = 0
    spans: list[bytes] = field(default_factory=list)  # the encoded events produced; models only when asked for
    outstanding: int = 0
    failures: list[BaseException] = field(default_factory=list)
    through: dict[int, int] = field(default_factory=dict)
    #: Sequence id assignment and queueing happen in one step per attempt. The attempt's own lock, not the
    #: processor's: a runner's 16 slots end spans on 16 threads, and one lock held across every slot's conversion
    #: and encoding made them queue on it (a blocked acquire gives the GIL away and back). Reentrant: a blocking
    #: reservation inside it may end a span of its own (an instrumented HTTP client).
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    #: The writer's callback for each of its spans (`KafkaSpanProcessor._delivered` bound to it), made once.
    delivered: Callable[[Delivered | AppendError], None] = field(init=False, repr=False)

    def take_sequence_id(self) -> int:
        """The next id: local, or the store's (never below the local one, whose spans the store may not
        have folded yet) when ids are shared with another writer. A failed reservation falls back to the
        local id: the span is kept, its place among the other writer's may be off.

        Past the reserved block the next block, twice as large, is reserved first; if that fails the span is not
        queued (and the flush fails): a local id there could be another attempt's."""
        if self.reserve is not None:
            try:
                return max(self.next_sequence_id, self.reserve())
            except Exception as exc:
                log.warning("no sequence id from the store (%s); span numbered locally", exc)
        elif self.reserved is not None and self.next_sequence_id > self.reserved.last:
            block = min(2 * self.block, MAX_RESERVED_BLOCK)
            self.next_sequence_id = self.reserved.more(block)
            self.block, self.reserved = block, ReservedIds(self.next_sequence_id + block - 1, self.reserved.more)
        return self.next_sequence_id


class KafkaSpanProcessor(SpanProcessor):
    """Stamps and ships spans that end while an attempt is active; counts what is still unacknowledged.

    Several attempts may be traced at once (a runner running rollouts concurrently): each `begin` binds its
    attempt to the current context (a contextvar, which asyncio tasks and `asyncio.to_thread` carry), and a
    span belongs to the attempt of the context it ends in. A span ended where no attempt is bound (a thread
    started by hand, an SDK callback thread) belongs to the only active attempt if there is exactly one, as
    before concurrency; with several active it cannot be placed and is dropped with a warning. One attempt
    at a time per context.
    """

    def __init__(self, writer: EventSink, more_coming: Callable[[], bool] | None = None) -> None:
        """`more_coming` says whether other spans are about to be written (see `KafkaTracer`)."""
        self._writer = writer
        self._more_coming = more_coming or (lambda: False)
        self._registry = threading.Lock()  # begin and end; each attempt orders its own spans (`_Attempt.lock`)
        self._current: ContextVar[_Attempt | None] = ContextVar(f"agl_attempt_{id(self)}", default=None)
        self._active: dict[int, _Attempt] = {}  # by id(): attempts between begin and end
        self._last: _Attempt | None = None  # the attempt begun last, for callers outside any context
        self._acks = threading.Condition()
        self._outstanding = 0
        self.produced = 0

    # -- attempt scope -------------------------------------------------------------------------
    def begin(self, rollout_id: str, attempt_id: str, first_sequence_id: int,
              reserve: Callable[[], int] | None = None, reserved: ReservedIds | None = None) -> _Attempt:
        """Bind a new attempt to the current context; returns it (the handle `end` and `flush` take)."""
        with self._registry:
            bound = self._current.get()
            if bound is not None and id(bound) in self._active:
                raise RuntimeError(f"tracer is already tracing rollout {bound.rollout_id} attempt "
                                   f"{bound.attempt_id} here; one attempt at a time per context")
            attempt = _Attempt(rollout_id, attempt_id, first_sequence_id,
                               AttemptSpans(self._writer.codec.header(Kind.SPAN_ADDED), rollout_id, attempt_id,
                                            self._writer.producer_id), reserve, reserved,
                               0 if reserved is None else reserved.last - first_sequence_id + 1,
                               first_sequence_id - 1)
            attempt.delivered = functools.partial(self._delivered, attempt)
            self._active[id(attempt)] = attempt
            self._last = attempt
            self._current.set(attempt)
            return attempt

    def end(self, attempt: _Attempt) -> None:
        with self._registry:
            self._active.pop(id(attempt), None)
            if self._current.get() is attempt:
                self._current.set(None)

    @property
    def active(self) -> bool:
        """Whether a span ended here now would be recorded."""
        return self._attempt() is not None

    @property
    def concurrent(self) -> int:
        """How many attempts are being traced right now."""
        return len(self._active)

    def _attempt(self) -> _Attempt | None:
        """The attempt a span ending here belongs to (see the class docstring)."""
        bound = self._current.get()
        if bound is not None and id(bound) in self._active:
            return bound
        if len(self._active) == 1:
            return next(iter(self._active.values()))
        return None

    def _known(self) -> _Attempt | None:
        """The current attempt, else the one begun last (for the attempt-less getters below)."""
        return self._attempt() or self._last

    @property
    def last_sequence_id(self) -> int | None:
        attempt = self._known()
        return None if attempt is None else attempt.last_sequence_id

    def spans_through(self, attempt: _Attempt | None = None) -> dict[int, int]:
        """Per partition of the span topic, the offset just past the attempt's last acknowledged span (the
        current or last attempt by default).

        After `flush` this covers every span of the attempt: the store waits until its view has read that
        far before it records the attempt finished, instead of asking the broker where each partition ends.
        """
        attempt = attempt or self._known()
        with self._acks:
            return {} if attempt is None else dict(attempt.through)

    def spans(self) -> list[Span]:
        """The spans queued for the current (or last) attempt, in sequence order."""
        attempt = self._known()
        if attempt is None:
            return []
        with attempt.lock:
            values = list(attempt.spans)
        return [Span.model_validate(span_model(self._writer.codec.decode(value).record["span"])) for value in values]

    # -- SpanProcessor -------------------------------------------------------------------------
    def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        """Must never raise (it runs inside user code's span.end()); failures surface in flush()."""
        ctx = span.get_span_context()
        if ctx is None or not ctx.trace_flags.sampled:
            return
        attempt = self._attempt()
        if attempt is None:
            if self._active:
                log.warning("span %s ended outside the context of any of the %d attempts being traced; not "
                            "recorded", span.name, len(self._active))
            else:
                log.debug("span %s ended outside a trace_context; not recorded", span.name)
            return
        try:
            self._queue(attempt, self._otel_event, span)
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
    def submit_otel(self, span: ReadableSpan) -> None:
        """Queue a finished OpenTelemetry span with the next sequence id, its event's bytes written straight from
        it (`tracer.span_bytes`). Raises (and records the failure for flush) when it cannot even be queued."""
        self._queue(self._current_attempt(), self._otel_event, span)

    def submit(self, build: Callable[[str, str, int], SpanRecord]) -> None:
        """Queue a span given as its record, `build(rollout_id, attempt_id, sequence_id)` stamping it with the next
        sequence id (a span model an agent returned: `runner.results`). Raises like `submit_otel`."""
        def encoded(attempt: _Attempt, _: None, sequence_id: int) -> EncodedEvent:
            new = record_event(build(attempt.rollout_id, attempt.attempt_id, sequence_id), self._writer.producer_id)
            return EncodedEvent(new, self._writer.encode(new))

        self._queue(self._current_attempt(), encoded, None)

    def _current_attempt(self) -> _Attempt:
        attempt = self._attempt()
        if attempt is None:
            raise RuntimeError("no active trace_context: spans need a rollout and attempt")
        return attempt

    def _otel_event(self, attempt: _Attempt, src: ReadableSpan, sequence_id: int) -> EncodedEvent:
        """The SpanAdded of `src`: written by the attempt's encoder, or from its record where that does not cover it.
        The event's record holds its header and the span's route and sequence id (its bytes hold the rest)."""
        event_id, now, producer_id = new_event_id(), time.time(), self._writer.producer_id
        try:
            value = checked(Kind.SPAN_ADDED, attempt.rollout_id, attempt.encoder.event(src, sequence_id, event_id, now))
        except NotCovered:
            new = record_event(otel_span_record(src, attempt.rollout_id, attempt.attempt_id, sequence_id), producer_id)
            return EncodedEvent(new, self._writer.encode(new))
        header = {"event_id": event_id, "time": now, "producer_id": producer_id,
                  "span": {"rollout_id": attempt.rollout_id, "attempt_id": attempt.attempt_id,
                           "sequence_id": sequence_id}}
        return EncodedEvent(NewEvent(Kind.SPAN_ADDED, attempt.rollout_id, header), value)

    def _queue(self, attempt: _Attempt, encode: Callable[[_Attempt, T, int], EncodedEvent], span: T) -> None:
        """Take the attempt's next sequence id, encode `span` with it and queue it, as one step per attempt; a
        failure is recorded for flush and raised. The encoder and its span come apart, not in a closure: this
        runs for every span an agent ends."""
        with attempt.lock:
            try:
                sequence_id = attempt.take_sequence_id()
                encoded = encode(attempt, span, sequence_id)
                with self._acks:
                    attempt.outstanding += 1
                    self._outstanding += 1
                    self.produced += 1
                try:
                    self._writer.send([encoded], attempt.delivered)
                except BaseException:
                    with self._acks:
                        attempt.outstanding -= 1
                        self._outstanding -= 1
                        self.produced -= 1
                        self._acks.notify_all()
                    raise
            except Exception as exc:
                with self._acks:
                    attempt.failures.append(exc)
                raise
            attempt.next_sequence_id = sequence_id + 1
            attempt.last_sequence_id = sequence_id
            attempt.spans.append(encoded.value)

    def _delivered(self, attempt: _Attempt, result: Delivered | AppendError) -> None:
        with self._acks:
            attempt.outstanding -= 1
            self._outstanding -= 1
            if isinstance(result, AppendError):
                attempt.failures.append(result)
            elif result.offset >= attempt.through.get(result.partition, 0):
                attempt.through[result.partition] = result.offset + 1
            if not attempt.outstanding or not self._outstanding:  # what `flush` waits for; else nobody can go on
                self._acks.notify_all()

    def flush(self, timeout: float = 30.0, attempt: _Attempt | None = None) -> None:
        """Wait until every span of `attempt` (the current or last one by default) is acknowledged, and every
        span queued so far when there is none; SpanFlushError if any of them was lost or late. An attempt's
        failures are reported once."""
        attempt = attempt or self._known()
        deadline = time.monotonic() + timeout
        if attempt is None or not (self._active or self._more_coming()):
            # Nothing else traced now or about to be: send at once rather than after the linger. While other attempts
            # run, a flush would send their spans early too (librdkafka drops the linger for all it holds while any
            # flush runs): a runner's 16 slots end attempts so often that one was nearly always flushing, and spans
            # left a few at a time (medium: the runners' librdkafka thread 2.7-5.7 ms of CPU per rollout, not 0.05).
            # Nor when the caller knows more spans are coming (`more_coming`: a runner's other rollouts): attempts of
            # a CPU-bound sync agent on 16 threads rarely overlap (one runs whole within the thread's turn at the
            # GIL), so "no other attempt traced" held at nearly every end and each flushed. Their acknowledgements
            # come within the linger without it.
            self._writer.flush(timeout)
        with self._acks:
            while (attempt.outstanding if attempt is not None else self._outstanding) > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    left = attempt.outstanding if attempt is not None else self._outstanding
                    raise SpanFlushError(f"{left} spans not acknowledged by Kafka within {timeout}s")
                self._acks.wait(remaining)
            failures: list[BaseException] = []
            if attempt is not None:
                failures, attempt.failures = attempt.failures, []
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
    """The SpanAdded event of a span in the JSON shape of our `Span` (lists, not tuples), decided now by
    `producer_id`: what the tracer and the LLM proxy's recorder append straight to the span topic."""
    added = SpanAdded.of(span).stamp(time.time(), producer_id)
    return NewEvent(added.kind, added.key, added.to_record())


def record_event(span: SpanRecord, producer_id: str) -> NewEvent:
    """The SpanAdded event of a span's record, decided now by `producer_id`: the header and the record as they are,
    with no typed event in between (building and stamping a frozen one cost as much as the span's conversion)."""
    return event(Kind.SPAN_ADDED, span["rollout_id"], time.time(), producer_id, span=span)


def span_added(src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int, producer_id: str) -> NewEvent:
    """The SpanAdded event the tracer produces for a finished OpenTelemetry span."""
    return record_event(otel_span_record(src, rollout_id, attempt_id, sequence_id), producer_id)


class TraceContext:
    """`with` / `async with` scope of one attempt; on exit it flushes, so spans are durable before the
    caller reports the attempt finished. A flush failure is raised unless the body already failed.
    Afterwards `spans_through()` says where this attempt's spans end, whatever other attempts ran meanwhile."""

    def __init__(self, tracer: KafkaTracer, rollout_id: str, attempt_id: str, first_sequence_id: int,
                 reserve: Callable[[], int] | None = None, reserved: ReservedIds | None = None) -> None:
        self._tracer = tracer
        self._args = (rollout_id, attempt_id, first_sequence_id)
        self._reserve = reserve
        self._reserved = reserved
        self._attempt: _Attempt | None = None

    def spans_through(self) -> dict[int, int]:
        """Span-topic partition -> offset past this attempt's acknowledged spans."""
        return self._tracer.processor.spans_through(self._attempt) if self._attempt is not None else {}

    def __enter__(self) -> KafkaTracer:
        self._attempt = self._tracer.processor.begin(*self._args, self._reserve, self._reserved)
        self._tracer.activate()
        return self._tracer

    def _leave(self) -> None:
        """Unbind the attempt in the caller's context (an async exit flushes on a thread, whose context is a copy)."""
        assert self._attempt is not None
        self._tracer.deactivate()
        self._tracer.processor.end(self._attempt)

    def _flush(self, exc: BaseException | None) -> None:
        try:
            self._tracer.processor.flush(self._tracer.flush_timeout, self._attempt)
        except SpanFlushError:
            if exc is None:
                raise
            log.exception("spans of rollout %s attempt %s were lost while the attempt failed", *self._args[:2])

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._leave()
        self._flush(exc)

    async def __aenter__(self) -> KafkaTracer:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._leave()
        await asyncio.to_thread(self._flush, exc)


class KafkaTracer:
    """An OpenTelemetry TracerProvider whose spans go to the experiment's span topic.

    `writer` is shared (one idempotent producer per process) and stays owned by the caller. `more_coming` (a
    runner's: other rollouts of its are running) says that other spans will soon be written: an attempt ending
    then leaves its spans to the producer's linger instead of sending them at once (`KafkaSpanProcessor.flush`).
    `install_global=True` calls `become_global` (and raises when it cannot), so spans of third-party
    instrumentation (OpenAI, LangChain, ...) and of `opentelemetry.trace.get_tracer(...)` report into the
    rollout; emitters find the provider either way. Runner processes do it (`Runner`); a library must not
    take the global provider of a process it does not own, so nothing else does by default.
    """

    def __init__(self, writer: EventSink, *, resource: Resource | None = None, install_global: bool = False,
                 flush_timeout: float = 30.0, more_coming: Callable[[], bool] | None = None) -> None:
        self.writer = writer
        self.flush_timeout = flush_timeout
        self.processor = KafkaSpanProcessor(writer, more_coming)
        self._activations = 0  # trace contexts open now; the provider is the emitters' while any is
        self._previous: trace.TracerProvider | None = None
        self._activation = threading.Lock()
        self.provider = TracerProvider(resource=resource) if resource is not None else TracerProvider()
        self.provider.add_span_processor(self.processor)
        if install_global and self.become_global() is None:
            raise RuntimeError("the global OpenTelemetry TracerProvider is not an SDK one: spans made through "
                               "it cannot reach this tracer")

    def become_global(self) -> TracerProvider | None:
        """Make spans made through OpenTelemetry's global provider reach this tracer's attempts; returns that
        global provider (ours, or the one ours joined), None when it could not.

        With no global provider set yet, ours becomes it. OpenTelemetry sets it once per process, so when the
        agent's own code set an SDK provider first (its exporter, say), ours does not replace it: our span
        processor joins it, and its spans go both to its exporters and, inside an attempt, to Kafka. A global
        provider that takes no processors (not an SDK one) is left alone, with a warning: then only our own
        provider (emitters, instrumentation given it explicitly) reaches the rollout.
        """
        current = trace.get_tracer_provider()
        if isinstance(current, trace.ProxyTracerProvider):  # none set yet
            trace.set_tracer_provider(self.provider)
            return self.provider
        if current is self.provider:
            return self.provider
        if isinstance(current, TracerProvider):
            current.add_span_processor(self.processor)
            log.info("a global TracerProvider was already set: its spans are also recorded into rollouts")
            return current
        log.warning("the global OpenTelemetry TracerProvider (%s) takes no span processors: spans made through "
                    "it are not recorded into rollouts", type(current).__name__)
        return None

    def trace_context(self, rollout_id: str, attempt_id: str, first_sequence_id: int = 1,
                      reserve: Callable[[], int] | None = None, reserved: ReservedIds | None = None
                      ) -> TraceContext:
        """Trace one attempt: spans ending inside get sequence ids first_sequence_id, +1, ... (through
        `reserved.last`, then from the blocks `reserved.more()` reserves), or each the id `reserve()` gives (when
        another writer, the LLM proxy, shares the rollout's ids)."""
        return TraceContext(self, rollout_id, attempt_id, first_sequence_id, reserve, reserved)

    def activate(self) -> None:
        """Make this provider the emitters' while at least one trace context is open (they may overlap)."""
        with self._activation:
            if self._activations == 0:
                self._previous = set_active_provider(self.provider)
            self._activations += 1

    def deactivate(self) -> None:
        with self._activation:
            self._activations -= 1
            if self._activations == 0:
                set_active_provider(self._previous)

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

"""What an agent returns, turned into spans of the attempt being traced (upstream runner's post-processing).

The runner's job, not the tracer's: the tracer only ships spans, the runner decides what a result means.

A number is the final reward: it becomes an `agentlightning.annotation` reward span via `emit_reward`.
A list of spans (ours, OpenTelemetry's ReadableSpan, or SpanCoreFields) is produced as given, re-stamped
with the attempt and fresh sequence ids. None means the tracer already saw everything.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel

from agl_events.emitter.reward import emit_reward
from agl_events.emitter.spans import SpanCoreFields, to_otel_status
from agl_events.events.typed import Span as SpanRecord
from agl_events.events.typed import span_of
from agl_events.tracer.convert import untupled
from agl_events.tracer.kafka import KafkaTracer, with_route
from agl_events.types import Span

log = logging.getLogger(__name__)


def _nanos(value: float | None) -> int | None:
    return None if value is None else int(value * 1_000_000_000)


def _restamped(span: Span) -> Any:
    def build(rollout_id: str, attempt_id: str, sequence_id: int) -> SpanRecord:
        return span_of(with_route(untupled({**span.model_dump(), "rollout_id": rollout_id, "attempt_id": attempt_id,
                                            "sequence_id": sequence_id})))

    return build


def record_result(tracer: KafkaTracer, result: Any) -> None:
    """Produce what `result` implies inside the tracer's active trace_context.

    Returns nothing: the attempt's spans as models are `tracer.get_last_trace()`, built when asked. The runner
    never asks, and building them for every attempt (a thousand pydantic spans for `span_burst`) took 16% of
    a runner's CPU in `bench.runners`."""
    if not tracer.processor.active:
        raise RuntimeError("record_result needs an active trace_context")
    if result is None:
        pass
    elif isinstance(result, bool | int | float):
        if not isinstance(result, float):
            log.warning("Reward is not a float, got: %s. Converting it.", type(result).__name__)
        emit_reward(float(result))
    elif isinstance(result, list):
        if not result:
            log.warning("The rollout returned an empty list; check the rollout implementation.")
        for item in result:
            _record_span(tracer, item)
    else:
        raise ValueError(f"Invalid rollout result of type {type(result).__name__}: expected None, a float "
                         "reward, or a list of spans")


def _record_span(tracer: KafkaTracer, item: Any) -> None:
    if isinstance(item, ReadableSpan):
        tracer.processor.submit_otel(item)
    elif isinstance(item, Span):
        tracer.processor.submit(_restamped(item))
    elif isinstance(item, SpanCoreFields):
        span = tracer.get_tracer().start_span(item.name, context=Context(), attributes=item.attributes,
                                              start_time=_nanos(item.start_time))  # a root, as upstream
        span.set_status(to_otel_status(item.status), item.status.description)
        span.end(_nanos(item.end_time))  # the processor's on_end produces it
    elif isinstance(item, BaseModel):  # e.g. agentlightning's own Span: same fields
        tracer.processor.submit(_restamped(Span.model_validate(item.model_dump())))
    else:
        raise ValueError(f"Invalid span in rollout result: {type(item).__name__}")


__all__ = ["record_result"]

"""Span events (spans topic)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agl_events.events.typed.base import Decided
from agl_events.events.typed.span import Span, span_of


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanAdded(Decided):
    """A span was accepted (by the store, or written straight to the log by a tracer or the LLM proxy)."""

    span: Span

    @property
    def key(self) -> str:
        return self.span["rollout_id"]

    @classmethod
    def of(cls, span: Mapping[str, Any]) -> SpanAdded:
        """The event of a span in the store's model shape, for the store's add_spans and the LLM proxy's recorder
        alike (the Kafka tracer builds the record straight from OpenTelemetry's span: `tracer.kafka.record_event`)."""
        return cls(span=span_of(span))


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanSequenceReserved(Decided):
    """Sequence ids up to and including `sequence_id` were handed out for the rollout."""

    rollout_id: str
    attempt_id: str
    sequence_id: int

    @property
    def key(self) -> str:
        return self.rollout_id

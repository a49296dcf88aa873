"""Contract tests of the LightningStore, run on every backend through the `store` fixture.

Shared helpers live here so each test module stays small.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from agl_events.log.memory import InMemoryLog
from agl_events.reducers import keys
from agl_events.samples.generations import generations
from agl_events.store.backend import Backend
from agl_events.store.follower import Follower
from agl_events.store.service import EventSourcedStore
from agl_events.types import LLM, OtelResource, Span, SpanContext, TraceStatus
from agl_events.views.store_view import StoreView

ROLLOUT_ID = re.compile(r"^ro-[0-9a-f]{12}$")
ATTEMPT_ID = re.compile(r"^at-[0-9a-f]{8}$")
RESOURCES_ID = re.compile(r"^rs-[0-9a-f]{12}$")


def make_span(rollout_id: str, attempt_id: str, sequence_id: int, *, span_id: str | None = None,
              trace_id: str | None = None, parent_id: str | None = None, name: str = "span",
              **extra: Any) -> Span:
    """A complete Span as Agent Lightning stores it (every required key present)."""
    trace_id = trace_id or uuid.uuid4().hex
    span_id = span_id or uuid.uuid4().hex[:16]
    return Span(
        rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id, trace_id=trace_id,
        span_id=span_id, parent_id=parent_id, name=name, status=TraceStatus(status_code="OK"),
        attributes={"k": "v"}, events=[], links=[], start_time=1.0, end_time=2.0,
        context=SpanContext(trace_id=trace_id, span_id=span_id, is_remote=False, trace_state={}),
        parent=None, resource=OtelResource(attributes={}, schema_url=""), **extra,
    )


def llm(model: str = "m") -> LLM:
    return LLM(endpoint="http://localhost:8000/v1", model=model)


def prompt(template: str = "hello {name}") -> dict[str, Any]:
    """Resources may be passed as models or as plain dicts with resource_type."""
    return {"resource_type": "prompt_template", "template": template, "engine": "f-string"}


__all__ = ["ATTEMPT_ID", "RESOURCES_ID", "ROLLOUT_ID", "llm", "make_span", "prompt"]


def store_over(view: StoreView, log: InMemoryLog) -> tuple[EventSourcedStore, Follower]:
    """The in-memory store's parts over a test's own view (a KeyValue that counts) or log (acks held back), and
    its follower."""
    follower = Follower(log.reader(), view)
    return EventSourcedStore(Backend(view, "test-store", log, follower)), follower


class DictView(dict[str, Any]):
    """A view as a plain dict, for decision contexts in unit tests of pure commands (`store.context.Readable`)."""

    def scan(self, prefix: str) -> Iterator[tuple[str, Any]]:
        return iter(sorted((k, v) for k, v in self.items() if k.startswith(prefix)))

    def generations(self) -> Mapping[str, int]:
        return generations((s["create_time"], s["resources_id"]) for _, s in self.scan(keys.RESOURCES))

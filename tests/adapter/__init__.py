"""Tests of the adapters against upstream's; the recorded span sets (spans/, see record_spans.py) and a
builder for hand-made spans are shared by the modules here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agl_events.types import Span

SPANS_DIR = Path(__file__).parent / "spans"
RECORDED = sorted(path.stem for path in SPANS_DIR.glob("*.json"))


def recorded(name: str) -> list[Span]:
    """A recorded span set, in sequence-id order (as the store returns it)."""
    return [Span.model_validate(span) for span in json.loads((SPANS_DIR / f"{name}.json").read_text())]


def upstream_spans(spans: list[Span]) -> list[Any]:
    """The same spans as upstream's model, which is what upstream's adapters take."""
    from agentlightning.types import Span as UpstreamSpan

    return [UpstreamSpan.model_validate(span.model_dump()) for span in spans]


def span(span_id: str, name: str = "step", parent: str | None = None, start: float = 0.0, end: float = 1.0,
         seq: int = 0, **attributes: Any) -> Span:
    """A hand-made span; attribute keys with dots are passed as a dict: span("a", attrs={"x.y": 1})."""
    attributes = {**attributes.pop("attrs", {}), **attributes}
    context = {"trace_id": "t", "span_id": span_id, "is_remote": False, "trace_state": {}}
    return Span.model_validate({
        "rollout_id": "ro", "attempt_id": "at", "sequence_id": seq, "trace_id": "t", "span_id": span_id,
        "parent_id": parent, "name": name, "status": {"status_code": "OK"}, "attributes": attributes,
        "events": [], "links": [], "start_time": start, "end_time": end, "context": context,
        "parent": None, "resource": {"attributes": {}, "schema_url": ""}})


def llm(span_id: str, parent: str | None = None, start: float = 0.0, end: float = 1.0, seq: int = 0,
        response_id: str | None = None, **attributes: Any) -> Span:
    """An LLM-call span with token ids (and a response id unless None)."""
    attrs = {"prompt_token_ids": [1, 2], "response_token_ids": [3], "gen_ai.prompt.0.role": "user",
             "gen_ai.prompt.0.content": f"q {span_id}", "gen_ai.completion.0.role": "assistant",
             "gen_ai.completion.0.content": f"a {span_id}", **attributes.pop("attrs", {})}
    if response_id is not None:
        attrs["gen_ai.response.id"] = response_id
    return span(span_id, "openai.chat.completion", parent, start, end, seq, attrs={**attrs, **attributes})


def reward(span_id: str, value: float, parent: str | None = None, start: float = 0.0, end: float = 0.0,
           seq: int = 0) -> Span:
    """A reward span as emit_reward writes it."""
    return span(span_id, "agentlightning.annotation", parent, start, end, seq,
                attrs={"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value})

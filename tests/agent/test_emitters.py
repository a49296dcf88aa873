"""Our emitters write the same spans as agentlightning 0.3.0's: names, attributes, status, nesting.

Both run under an in-memory OpenTelemetry exporter (upstream through its OtelTracer, ours through a
plain SDK provider) and their finished spans are compared field by field, so upstream's adapters,
which look spans up by exactly these strings, read ours as their own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agl_events.emitter as ours
from agl_events.emitter import set_active_provider
from agl_events.emitter.attributes import make_link_attributes, make_tag_attributes

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

Scenario = Callable[[ModuleType], Any]


@pytest.fixture
def ours_exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = set_active_provider(provider)
    yield exporter
    set_active_provider(previous)


@pytest.fixture
def upstream_exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Upstream's OtelTracer as the active tracer, minus its global provider (OpenTelemetry allows one per
    process and the rest of the suite must not inherit it)."""
    from agentlightning.tracer.base import clear_active_tracer, set_active_tracer
    from agentlightning.tracer.otel import OtelTracer

    monkeypatch.setattr(trace, "set_tracer_provider", lambda provider: None)
    tracer = OtelTracer()
    tracer.init_worker(0)
    exporter = InMemorySpanExporter()
    tracer._tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[union-attr]
    set_active_tracer(tracer)
    yield exporter
    clear_active_tracer()


def shape(spans: tuple[ReadableSpan, ...]) -> list[dict[str, Any]]:
    """What adapters depend on, per span in end order: parents as indexes since ids are random."""
    index = {s.context.span_id: i for i, s in enumerate(spans) if s.context is not None}
    return [{
        "name": s.name,
        "attributes": dict(s.attributes or {}),
        "status": (s.status.status_code.name, s.status.description),
        "events": [(e.name, sorted((e.attributes or {}).keys())) for e in s.events],
        "parent": index.get(s.parent.span_id) if s.parent else None,
    } for s in spans]


def _decorated(m: ModuleType) -> Any:
    @m.operation
    def add(a: int, b: int = 2, *rest: int, **kw: Any) -> dict[str, Any]:
        m.emit_reward(0.25)
        return {"sum": a + b + sum(rest), "kw": kw}

    return add(1, 3, 4, z=5)


def _decorated_with_attributes(m: ModuleType) -> Any:
    @m.operation(category="compute", name="alias")
    def tool(query: str) -> list[str]:
        m.emit_message("inside", attributes={"step": 1})
        return [query, query]

    return tool("q")


def _decorated_async(m: ModuleType) -> Any:
    @m.operation
    async def fetch(url: str, retries: int = 1) -> int:
        await asyncio.sleep(0)
        return len(url) * retries

    return asyncio.run(fetch("http://x", retries=3))


def _context_manager(m: ModuleType) -> Any:
    with m.operation(user_id=123, tags=["a", "b"]) as op:
        op.set_input(1, "two", data={"nested": [1, 2]})
        m.emit_object({"inner": True})
        op.set_output({"answer": 42, "items": [1.5, 2.5]})
    return None


def _failing_operation(m: ModuleType) -> Any:
    with pytest.raises(ValueError, match="boom"), m.operation(name="fails"):
        raise ValueError("boom")

    @m.operation
    def broken() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        broken()


def _exception(m: ModuleType) -> Any:
    try:
        raise RuntimeError("tool crashed")
    except RuntimeError as exc:
        error = exc
    m.emit_exception(error, attributes={"where": {"tool": "search"}})


SCENARIOS: dict[str, Scenario] = {
    "reward_float": lambda m: m.emit_reward(0.5),
    "reward_int_and_bool": lambda m: (m.emit_reward(1), m.emit_reward(True)),
    "reward_dict": lambda m: m.emit_reward({"task": 1.0, "efficiency": 0.5, "steps": 3}, primary_key="task"),
    "reward_with_links_and_tags": lambda m: m.emit_reward(
        0.7, attributes={**make_link_attributes({"gen_ai.response.id": "resp-1"}), **make_tag_attributes(["x", "y"]),
                         "meta": {"source": "judge", "scores": [1, 2]}}),
    "message": lambda m: m.emit_message("hello", attributes={"level": "info", "ctx": {"n": 1, "vals": ["a"]}}),
    "object_json": lambda m: m.emit_object({"x": [1, 2], "y": None}, attributes={"k": "v"}),
    "object_literals": lambda m: [m.emit_object(v) for v in ("s", 3, 2.5, False, b"\x00\x01")],
    "object_list": lambda m: m.emit_object([1, "a", {"b": 2}]),
    "exception": _exception,
    "operation_decorator": _decorated,
    "operation_decorator_attributes": _decorated_with_attributes,
    "operation_async": _decorated_async,
    "operation_context_manager": _context_manager,
    "operation_failure": _failing_operation,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=list(SCENARIOS))
def test_emitters_write_what_upstream_writes(scenario: str, ours_exporter: InMemorySpanExporter,
                                             upstream_exporter: InMemorySpanExporter) -> None:
    import agentlightning.emitter as upstream

    run = SCENARIOS[scenario]
    assert run(ours) == run(upstream) or scenario.startswith(("reward", "object"))  # return values: below
    got, want = shape(ours_exporter.get_finished_spans()), shape(upstream_exporter.get_finished_spans())
    for span in got + want:  # line numbers may differ between the two runs; the key must be there
        assert span["attributes"].pop("exception.stacktrace", "present") != ""
    assert got == want
    assert got, "the scenario emitted nothing"


def test_returned_core_fields_match_upstream(ours_exporter: InMemorySpanExporter,
                                             upstream_exporter: InMemorySpanExporter) -> None:
    import agentlightning.emitter as upstream

    def fields(core: Any) -> dict[str, Any]:
        dumped = core.model_dump()
        assert dumped.pop("start_time") > 0 and dumped.pop("end_time") > 0
        return dumped

    def operation_fields(m: ModuleType) -> dict[str, Any]:
        with m.operation(user_id=7) as op:
            op.set_output({"answer": 42})
        return fields(op.span())

    assert fields(ours.emit_reward(0.5)) == fields(upstream.emit_reward(0.5))
    assert fields(ours.emit_object({"a": 1})) == fields(upstream.emit_object({"a": 1}))
    assert operation_fields(ours) == operation_fields(upstream)
    offline = ours.emit_reward({"a": 2, "b": 1.0}, primary_key="b", propagate=False)
    assert fields(offline) == fields(upstream.emit_reward({"a": 2, "b": 1.0}, primary_key="b", propagate=False))
    assert len(ours_exporter.get_finished_spans()) == 3  # propagate=False records nothing


def test_readers_agree_with_upstream_on_our_spans(ours_exporter: InMemorySpanExporter) -> None:
    import agentlightning.emitter as upstream

    ours.emit_message("not a reward")
    ours.emit_reward({"quality": 0.9, "cost": -1}, primary_key="quality")
    ours.emit_reward(0.3)
    ours.emit_object("also not a reward")
    spans = list(ours_exporter.get_finished_spans())
    assert ours.find_final_reward(spans) == upstream.find_final_reward(spans) == 0.3
    assert [ours.get_reward_value(s) for s in spans] == [upstream.get_reward_value(s) for s in spans]
    assert [r.model_dump() for r in ours.get_rewards_from_span(spans[1])] == \
        [r.model_dump() for r in upstream.get_rewards_from_span(spans[1])] == \
        [{"name": "quality", "value": 0.9}, {"name": "cost", "value": -1.0}]
    assert ours.get_message_value(spans[0]) == upstream.get_message_value(spans[0]) == "not a reward"
    assert ours.get_object_value(spans[3]) == upstream.get_object_value(spans[3]) == "also not a reward"


def test_invalid_rewards_are_refused_like_upstream(ours_exporter: InMemorySpanExporter) -> None:
    with pytest.raises(TypeError):
        ours.emit_reward("high")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="primary_key"):
        ours.emit_reward({"a": 1.0})
    with pytest.raises(ValueError, match="not found"):
        ours.emit_reward({"a": 1.0}, primary_key="b")
    with pytest.raises(ValueError, match="must be a number"):
        ours.emit_reward({"a": "x"}, primary_key="a")
    with pytest.raises(TypeError):
        ours.emit_message(3)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="JSON serializable"):
        ours.emit_object(object())
    assert ours_exporter.get_finished_spans() == ()


def test_emitting_without_any_tracer_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reward sent nowhere would silently vanish from training; upstream raises too."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    previous = set_active_provider(None)
    try:
        with pytest.raises(RuntimeError, match="No active tracer"):
            ours.emit_reward(1.0)
        assert ours.emit_reward(1.0, propagate=False).attributes["agentlightning.reward.0.value"] == 1.0
    finally:
        set_active_provider(previous)

"""TraceToMessages gives upstream's OpenAI fine-tuning records, without the openai package."""

from __future__ import annotations

from typing import Any

import pytest

from agl_events.adapter import TraceToMessages
from agl_events.adapter.messages import group_genai_dict
from tests.adapter import RECORDED, recorded, span, upstream_spans


def _both(spans: list[Any]) -> list[Any]:
    from agentlightning.adapter import TraceToMessages as Upstream

    ours = TraceToMessages().adapt(spans)
    assert ours == Upstream().adapt(upstream_spans(spans))
    return ours


@pytest.mark.parametrize("name", RECORDED)
def test_same_records_as_upstream(name: str) -> None:
    _both(recorded(name))


def test_tool_use_round_trip() -> None:
    """The planner's first call: a tool call (its tool span a child), the function offered; then the result."""
    first, second = _both(recorded("ours_agents"))[:2]
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]
    call = first["messages"][-1]["tool_calls"][0]
    assert call["type"] == "function" and call["function"] == {"name": "add", "arguments": '{"a": 2, "b": 2}'}
    assert first["tools"][0]["function"]["parameters"]["type"] == "object"  # JSON text parsed
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert second["messages"][2]["content"] is None and second["messages"][3]["tool_call_id"] == call["id"]
    assert second["tools"] is None


def test_grouping_like_upstream() -> None:
    from agentlightning.adapter.messages import group_genai_dict as upstream_group

    flat = {"p.0.role": "user", "p.2.role": "tool", "p.2.x.y": 1, "p.name": "dropped", "q.0": 1}
    expected = [{"role": "user"}, {"role": "tool", "x": {"y": 1}}]  # indices need not be consecutive
    assert group_genai_dict(flat, "p") == upstream_group(flat, "p") == expected
    nested = {"r.model": "m", "r.functions.0.name": "f", "r.functions.1.name": "g"}
    assert group_genai_dict(nested, "r") == upstream_group(nested, "r") == {
        "model": "m", "functions": [{"name": "f"}, {"name": "g"}]}


@pytest.mark.parametrize(("message", "error"), [
    ({"role": "tool", "content": "4"}, "tool_call_id"),
    ({"role": "function", "content": "4"}, "Unsupported message role"),
])
def test_messages_openai_would_reject_are_errors(message: dict[str, Any], error: str) -> None:
    attrs = {f"gen_ai.prompt.0.{k}": v for k, v in message.items()}
    with pytest.raises(ValueError, match=error):
        TraceToMessages().adapt([span("s", attrs=attrs)])


def test_a_prompt_that_is_not_a_list_is_an_error() -> None:
    with pytest.raises(ValueError, match="prompt from trace is not a list"):
        TraceToMessages().adapt([span("s", attrs={"gen_ai.prompt.role": "user"})])


def test_no_spans() -> None:
    assert _both([]) == []

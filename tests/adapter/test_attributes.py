"""Attribute readers: agent names by framework convention, first-match key lists, as upstream reads them."""

from __future__ import annotations

from typing import Any

import pytest

from agl_events.adapter.attributes import RESPONSE_TOKEN_IDS, agent_name, first_string, first_token_ids
from tests.adapter import span, upstream_spans

CONVENTIONS: list[tuple[str, dict[str, Any], Any]] = [
    ("openai-agents", {"agent.name": "a"}, "a"),
    ("agentops", {"agentops.span.kind": "agent", "operation.name": "b"}, "b"),
    ("agentops-task", {"agentops.span.kind": "task", "operation.name": "b"}, None),
    ("autogen", {"recipient_agent_type": "c"}, "c"),
    ("langgraph", {"langchain.chain.type": "d"}, "d"),
    ("agent-framework", {"executor.id": "e"}, "e"),
    ("weave", {"type": "agent", "agentlightning.operation.input.name": "f"}, "f"),
    ("first-wins", {"agent.name": "a", "executor.id": "e"}, "a"),
    ("none", {"gen_ai.system": "OpenAI"}, None),
]


@pytest.mark.parametrize(("case", "attributes", "expected"), CONVENTIONS, ids=[c[0] for c in CONVENTIONS])
def test_agent_name_as_upstream(case: str, attributes: dict[str, Any], expected: Any) -> None:
    from agentlightning.adapter.triplet import TraceTree as UpstreamTree

    ours = span("s", attrs=attributes)
    assert agent_name(ours) == expected
    assert UpstreamTree("s", upstream_spans([ours])[0]).agent_name() == expected


def test_weave_langchain_chains_are_named_by_lc_name() -> None:
    assert agent_name(span("s", "langchain.Chain.Router", lc_name="router")) == "router"
    assert agent_name(span("s", "other", lc_name="router")) is None


def test_first_match_skips_values_of_the_wrong_type() -> None:
    attributes = {"response_token_ids": "not ids", "agentlightning.operation.output.choices.0.token_ids": [7, 8]}
    assert first_token_ids(attributes, RESPONSE_TOKEN_IDS) == [7, 8]
    assert first_string({"a": 1, "b": "x"}, ["a", "b"]) == "x"
    assert first_token_ids({}, RESPONSE_TOKEN_IDS) is None

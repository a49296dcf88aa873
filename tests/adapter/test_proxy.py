"""LlmProxyTraceToTriplet gives upstream's triplets on LLM proxy spans (LiteLLM's stringified vLLM fields)."""

from __future__ import annotations

from typing import Any

import pytest

from agl_events.adapter import LlmProxyTraceToTriplet
from tests.adapter import RECORDED, recorded, reward, span, upstream_spans


def _both(spans: list[Any]) -> list[dict[str, Any]]:
    from agentlightning.adapter import LlmProxyTraceToTriplet as Upstream

    ours = [t.model_dump() for t in LlmProxyTraceToTriplet().adapt(spans)]
    assert ours == [t.model_dump() for t in Upstream().adapt(upstream_spans(spans))]
    return ours


@pytest.mark.parametrize("name", RECORDED)
def test_same_triplets_as_upstream(name: str) -> None:
    _both(recorded(name))


def test_the_recorded_proxy_run() -> None:
    """Five requests, one retried (same response id), one answered the older vLLM way; rewards by sequence."""
    triplets = _both(recorded("upstream_proxy"))
    assert [t["reward"] for t in triplets] == [None, 0.2, 1.0, 0.9]
    assert all(t["prompt"]["token_ids"] and t["response"]["token_ids"] for t in triplets)
    assert len({t["metadata"]["response_id"] for t in triplets}) == 4


def _raw(span_id: str, seq: int, **fields: Any) -> Any:
    return span(span_id, "raw_gen_ai_request", seq=seq, attrs={f"llm.hosted_vllm.{k}": v for k, v in fields.items()})


def test_token_ids_from_each_field_and_rewards_by_sequence() -> None:
    spans = [
        _raw("old", 1, prompt_token_ids="[1, 2]", response_token_ids="[[3, 4]]", id="r-old"),
        _raw("new", 2, prompt_token_ids="[5]", choices="[{'token_ids': [6], 'index': 0}]", id="r-new"),
        _raw("bad", 3, prompt_token_ids="not a list", choices="[{'token_ids': [6]}]", id="r-bad"),
        span("client", "litellm_request", seq=4, prompt_token_ids=[7], response_token_ids="[8, 9]",
             attrs={"gen_ai.response.id": "r-client"}),
        span("other", "openai.chat.completion", seq=5, prompt_token_ids=[1], response_token_ids=[2]),
        reward("same-seq", 1.0, seq=4), reward("late", 0.5, seq=6), reward("later", 0.25, seq=7),
    ]
    triplets = _both(spans)
    assert [(t["prompt"]["token_ids"], t["response"]["token_ids"], t["metadata"]["response_id"], t["reward"])
            for t in triplets] == [([1, 2], [3, 4], "r-old", 0.25), ([5], [6], "r-new", 1.0),
                                   ([7], [8, 9], "r-client", 0.5)]


def test_no_spans() -> None:
    assert _both([]) == []

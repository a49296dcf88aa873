"""TracerTraceToTriplet gives upstream's triplets on spans of real runs (ours and upstream's), for every option."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agl_events.adapter import RewardMatchPolicy, TracerTraceToTriplet
from tests.adapter import RECORDED, llm, recorded, reward, span, upstream_spans

AGENT_MATCHES = [None, "planner|worker|researcher|remote", "solver|writer|helper"]
OPTIONS = [dict(repair_hierarchy=r, exclude_llm_call_in_reward=e, reward_match=m, agent_match=a)
           for r, e, m, a in itertools.product([True, False], [True, False], list(RewardMatchPolicy), AGENT_MATCHES)]


def _both(spans: list[Any], **options: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from agentlightning.adapter import TracerTraceToTriplet as Upstream

    ours = [t.model_dump() for t in TracerTraceToTriplet(**options).adapt(spans)]
    theirs = [t.model_dump() for t in Upstream(**options).adapt(upstream_spans(spans))]
    return ours, theirs


@pytest.mark.parametrize("name", RECORDED)
def test_same_triplets_as_upstream_for_every_option(name: str) -> None:
    spans = recorded(name)
    outputs = []
    for options in OPTIONS:
        ours, theirs = _both(spans, **options)
        assert ours == theirs, options
        outputs.append(ours)
    if name.startswith("ours_") or name == "upstream_agentops":  # the options matter on these traces
        assert len({repr(o) for o in outputs}) > 1


def test_recordings_cover_what_they_claim() -> None:
    """Guards the fixtures: every token-id convention, logprobs, tool calls, rewards at each depth."""
    triplets = TracerTraceToTriplet().adapt(recorded("ours_agents"))
    assert [t.metadata["agent_name"] for t in triplets] == ["planner"] * 2 + ["solver"] * 4
    assert all(t.prompt["token_ids"] and t.response["token_ids"] for t in triplets)  # every convention read
    assert "logprobs" in triplets[0].response and triplets[0].response["logprobs"][0]["logprob"] == -0.25
    assert [t.reward for t in triplets] == [None, 0.25, None, None, 1.0, 0.5]
    assert len(TracerTraceToTriplet(exclude_llm_call_in_reward=False).adapt(recorded("ours_agents"))) == 7  # judge
    upstream = TracerTraceToTriplet().adapt(recorded("upstream_agentops"))
    assert [(t.metadata["agent_name"], t.reward) for t in upstream] == [
        ("researcher", 0.8), ("researcher", 0.1), ("writer", 0.5)]


def test_repair_hierarchy_finds_calls_made_on_threads() -> None:
    """Spans from worker threads are roots; only after repair do they sit under the agent that waited."""
    spans = recorded("ours_threads")
    repaired = TracerTraceToTriplet(agent_match="worker").adapt(spans)
    assert [(t.metadata["agent_name"], t.reward) for t in repaired] == [("worker", 1.0), ("worker", 0.75)]
    assert TracerTraceToTriplet(agent_match="worker", repair_hierarchy=False).adapt(spans) == []


def test_duplicate_and_nested_calls_count_once() -> None:
    spans = [span("root", end=10),
             llm("a", "root", 1, 4, response_id="r1"),
             llm("inner", "a", 2, 3),  # the wrapped client's own span: no response id
             llm("again", "a", 2, 3, response_id="r1"),  # the same response reported twice
             llm("b", "root", 5, 6, response_id="r1"),
             llm("c", "root", 7, 8, response_id="r2")]
    ours, theirs = _both(spans)
    assert ours == theirs
    assert [t["metadata"]["response_id"] for t in ours] == ["r1", "r2"]


def test_a_nested_call_with_its_own_response_id_counts() -> None:
    ours, theirs = _both([span("root", end=10), llm("a", "root", 1, 4, response_id="r1"),
                          llm("inner", "a", 2, 3, response_id="r2")])
    assert ours == theirs and [t["metadata"]["response_id"] for t in ours] == ["r1", "r2"]


@pytest.mark.parametrize("policy", list(RewardMatchPolicy))
def test_a_reward_before_any_llm_call_is_dropped(policy: RewardMatchPolicy) -> None:
    spans = [span("root", end=10), reward("early", 1.0, "root", 0.5, 0.5), llm("a", "root", 1, 2, response_id="r"),
             reward("late", 0.5, "root", 3, 3)]
    ours, theirs = _both(spans, reward_match=policy)
    assert ours == theirs and [t["reward"] for t in ours] == [0.5]


def test_policies_differ_on_a_reward_outside_the_calls_parent() -> None:
    spans = [span("root", end=10), span("agent", parent="root", start=1, end=5, **{"agent.name": "x"}),
             llm("a", "agent", 2, 3, response_id="r"), reward("final", 1.0, "root", 6, 6)]
    by_policy = {}
    for policy in RewardMatchPolicy:
        ours, theirs = _both(spans, reward_match=policy)
        assert ours == theirs
        by_policy[policy] = ours[0]["reward"]
    assert by_policy == {RewardMatchPolicy.FIRST_OCCURRENCE: 1.0, RewardMatchPolicy.FIRST_SIBLING: None}


def test_logprobs_and_image_urls() -> None:
    content = '[{"type": "text", "text": "what?"}, {"type": "image_url", "image_url": {"url": "http://i/1.png"}}]'
    logprobs = '[{"token": "4", "logprob": -0.1, "bytes": [52], "top_logprobs": []}]'
    spans = [llm("a", response_id="r", attrs={"gen_ai.prompt.0.content": content, "logprobs.content": logprobs})]
    ours, theirs = _both(spans)
    assert ours == theirs
    assert ours[0]["response"]["logprobs"] == [{"token": "4", "logprob": -0.1, "bytes": [52], "top_logprobs": []}]
    assert ours[0]["prompt"]["image_urls"] == ["http://i/1.png"]


def test_skip_empty_token_spans() -> None:
    spans = [span("root", end=10), llm("a", "root", 1, 2, response_id="r1"),
             llm("b", "root", 3, 4, response_id="r2", response_token_ids=[])]
    assert len(TracerTraceToTriplet().adapt(spans)) == 2
    ours, theirs = _both(spans, _skip_empty_token_spans=True)
    assert ours == theirs and [t["metadata"]["response_id"] for t in ours] == ["r1"]


def test_no_spans_is_an_error_as_upstream() -> None:
    with pytest.raises(ValueError, match="No spans provided"):
        TracerTraceToTriplet()([])


def test_an_adapter_is_callable() -> None:
    spans = recorded("ours_remote_parent")
    assert TracerTraceToTriplet()(spans) == TracerTraceToTriplet().adapt(spans)

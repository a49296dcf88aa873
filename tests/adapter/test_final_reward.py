"""FinalRewardTriplets: one transition per LLM call, each with the rollout's final reward."""

from __future__ import annotations

from agl_events.adapter import FinalRewardTriplets, TracerTraceToTriplet, build_adapter
from tests.adapter import llm, reward, span

#: A two-call rollout rewarded once, at the end (the `tools` demo's shape).
TWO_CALLS = [span("root", end=10, seq=0), llm("pick", "root", 1, 2, seq=1, response_id="r1"),
             llm("answer", "root", 3, 4, seq=2, response_id="r2"), reward("final", 0.75, "root", 5, 5, seq=3)]


def test_every_call_gets_the_final_reward() -> None:
    triplets = FinalRewardTriplets().adapt(TWO_CALLS)
    assert [t.metadata["response_id"] for t in triplets] == ["r1", "r2"]
    assert [t.reward for t in triplets] == [0.75, 0.75]
    plain = TracerTraceToTriplet().adapt(TWO_CALLS)  # upstream's: only the call before the reward
    assert [t.reward for t in plain] == [None, 0.75]
    assert [t.model_copy(update={"reward": None}) for t in triplets] == [
        t.model_copy(update={"reward": None}) for t in plain]


def test_the_last_reward_is_the_final_one_and_none_stays_none() -> None:
    twice = [*TWO_CALLS[:2], reward("early", 0.1, "root", 2.5, 2.5, seq=2), llm("answer", "root", 3, 4, seq=3,
             response_id="r2"), reward("final", 1.0, "root", 5, 5, seq=4)]
    assert [t.reward for t in FinalRewardTriplets().adapt(twice)] == [1.0, 1.0]
    assert [t.reward for t in FinalRewardTriplets().adapt(TWO_CALLS[:3])] == [None, None]


def test_a_spec_names_it_with_the_tracer_adapters_arguments() -> None:
    adapter = build_adapter({"type": "FinalRewardTriplets", "llm_call_match": "openai"})
    assert isinstance(adapter, FinalRewardTriplets) and adapter.llm_call_match == "openai"
    assert len(adapter.adapt(TWO_CALLS)) == 2

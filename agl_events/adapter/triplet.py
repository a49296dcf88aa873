"""TracerTraceToTriplet: the default adapter, spans traced in the agent's process -> one triplet per LLM call.

Upstream's Trainer uses it unless told otherwise, with these constructor arguments and defaults, so an
algorithm configured for upstream (`agent_match=...`, `reward_match=FIRST_SIBLING`) trains the same here.
"""

from __future__ import annotations

from collections.abc import Sequence

from agl_events.adapter.base import TraceToTripletBase
from agl_events.adapter.tree import RewardMatchPolicy, TraceTree
from agl_events.types import Span, Triplet


class TracerTraceToTriplet(TraceToTripletBase):
    """Build the trace tree, optionally repair it, and read off the LLM calls with their rewards.

    Args:
        repair_hierarchy: re-parent top-level spans under the tightest span enclosing them in time first.
        llm_call_match: regular expression (searched) for LLM-call span names.
        agent_match: regular expression for agent names; only calls under a matching agent count. None: all.
        exclude_llm_call_in_reward: ignore LLM calls made under a reward span (an LLM judge, say).
        reward_match: how rewards find their calls (see RewardMatchPolicy).
        _skip_empty_token_spans: drop calls without prompt or response token ids (upstream's hot-fix flag).
    """

    def __init__(self, repair_hierarchy: bool = True, llm_call_match: str = r"openai\.chat\.completion",
                 agent_match: str | None = None, exclude_llm_call_in_reward: bool = True,
                 reward_match: RewardMatchPolicy = RewardMatchPolicy.FIRST_OCCURRENCE,
                 _skip_empty_token_spans: bool = False) -> None:
        self.repair_hierarchy = repair_hierarchy
        self.llm_call_match = llm_call_match
        self.agent_match = agent_match
        self.exclude_llm_call_in_reward = exclude_llm_call_in_reward
        self.reward_match = reward_match
        self._skip_empty_token_spans = _skip_empty_token_spans

    def adapt(self, source: Sequence[Span], /) -> list[Triplet]:
        """ValueError for an empty span list, as upstream (callers skip rollouts without spans)."""
        tree = TraceTree.from_spans(source)
        if self.repair_hierarchy:
            tree.repair_hierarchy()
        return tree.to_trajectory(llm_call_match=self.llm_call_match, agent_match=self.agent_match,
                                  exclude_llm_call_in_reward=self.exclude_llm_call_in_reward,
                                  reward_match=self.reward_match,
                                  _skip_empty_token_spans=self._skip_empty_token_spans)

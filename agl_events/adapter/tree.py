"""A rollout's spans as a tree, and the rules that pick its LLM calls and hand each its reward.

A trajectory is not a flat list: which LLM calls count depends on the agent span they sit under, rewards
are matched to calls by position in the tree or in time, and some frameworks lose the parent links that
say which agent a call belongs to. This is a port of upstream's `TraceTree` (agentlightning 0.3.0
`adapter/triplet.py`): the same traversal order, tie-breaking and quirks, so the same spans give the same
triplets, with one exception: several missing parents become roots in order of first appearance, where
upstream iterates a set (an order that changes from process to process).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from agl_events.adapter.attributes import RESPONSE_ID, agent_name, first_string
from agl_events.adapter.llm_call import llm_call_triplet
from agl_events.emitter.reward import get_reward_value
from agl_events.semconv import AGL_OPERATION, AGL_REWARD, AGL_VIRTUAL, LightningSpanAttributes
from agl_events.types import OtelResource, Span, SpanContext, TraceStatus, Triplet

log = logging.getLogger(__name__)

VIRTUAL_ROOT = "virtual-root"
#: What `to_trajectory` calls the agent of an LLM call made outside any agent span when no agent_match is set.
ANY_AGENT = "*"


class RewardMatchPolicy(StrEnum):
    """How a reward span finds the LLM call it rewards: always the latest call that ended before the reward
    started and has no reward yet, looked for among..."""

    FIRST_SIBLING = "first_sibling"
    """...the reward's earlier siblings (children of the same span, in tree order)."""

    FIRST_OCCURRENCE = "first_occurrence"
    """...every span of the trace, in start-time order."""


def is_reward_span(span: Span) -> bool:
    """A span with a reward value, or an AGL 0.3 reward operation (which may carry its value elsewhere)."""
    if get_reward_value(span) is not None:
        return True
    return (span.name == AGL_OPERATION
            and span.attributes.get(LightningSpanAttributes.OPERATION_NAME.value) == AGL_REWARD)


def _virtual_span(like: Span, span_id: str, name: str, start: float | None, end: float | None) -> Span:
    """A stand-in for a span the trace lacks (upstream's `Span.from_attributes` with empty attributes)."""
    return Span(rollout_id=like.rollout_id, attempt_id=like.attempt_id, sequence_id=like.sequence_id,
                trace_id=like.trace_id, span_id=span_id, parent_id=None, name=name,
                status=TraceStatus(status_code="OK"), attributes={}, events=[], links=[],
                start_time=start, end_time=end,
                context=SpanContext(trace_id=like.trace_id, span_id=span_id, is_remote=False, trace_state={}),
                parent=None, resource=OtelResource(attributes={}, schema_url=""))


@dataclass(eq=False)  # nodes are compared by identity, as list.remove in repair_hierarchy needs
class TraceTree:
    id: str
    span: Span
    children: list[TraceTree] = field(default_factory=list)

    @property
    def start_time(self) -> float | None:
        return self.span.start_time

    @property
    def end_time(self) -> float | None:
        return self.span.end_time

    @classmethod
    def from_spans(cls, spans: Sequence[Span]) -> TraceTree:
        """The tree of `spans`; a parent id naming no span becomes a virtual span over its children, and
        several roots hang under a virtual root. ValueError for no spans (or no root at all)."""
        if not spans:
            raise ValueError("No spans provided to create TraceTree.")
        by_id = {span.span_id: span for span in spans}
        children_of: dict[str, list[str]] = {}
        root_ids: list[str] = []
        for span in spans:
            if span.parent_id is None:
                root_ids.append(span.span_id)
            else:
                children_of.setdefault(span.parent_id, []).append(span.span_id)
        root_ids.extend(parent for parent in children_of if parent not in by_id)  # e.g. a lost session span

        def build(node_id: str) -> TraceTree:
            children = [build(child) for child in children_of.get(node_id, [])]
            if node_id in by_id:
                return cls(node_id, by_id[node_id], children)
            starts = [c.start_time for c in children if c.start_time is not None]
            ends = [c.end_time for c in children if c.end_time is not None]
            span = _virtual_span(children[0].span, node_id, AGL_VIRTUAL, min(starts), max(ends))
            return cls(node_id, span, children)

        if not root_ids:
            raise ValueError("No root spans found in the trace.")
        if len(root_ids) == 1:
            return build(root_ids[0])
        roots = [build(root_id) for root_id in root_ids]
        span = _virtual_span(roots[0].span, VIRTUAL_ROOT, VIRTUAL_ROOT, roots[0].start_time, roots[-1].end_time)
        return cls(VIRTUAL_ROOT, span, roots)

    def traverse(self) -> list[TraceTree]:
        """Every node, depth first, parents before children."""
        nodes = [self]
        for child in self.children:
            nodes.extend(child.traverse())
        return nodes

    def repair_hierarchy(self) -> None:
        """Move each top-level child under the tightest other span that encloses it in time.

        Frameworks tracing through several subsystems leave LLM calls floating at the top instead of under
        their agent, so agent_match would never find them. A single child (e.g. AgentOps' session span
        wrapping everything) is descended into first.
        """
        if len(self.children) == 1:
            self.children[0].repair_hierarchy()
            return
        for orphan in list(self.children):
            if len(self.children) == 1:
                break
            closest: TraceTree | None = None
            closest_slack = float("inf")
            for node in self.traverse():
                if node.id == orphan.id or node is self:
                    continue
                if node.start_time <= orphan.start_time and node.end_time >= orphan.end_time:  # type: ignore[operator]
                    slack = node.end_time - orphan.end_time + orphan.start_time - node.start_time  # type: ignore[operator]
                    if 0 < slack < closest_slack:
                        closest, closest_slack = node, slack
            if closest is not None:
                self.children.remove(orphan)
                closest.children.append(orphan)

    def find_llm_calls(self, *, llm_call_match: str, agent_match: str | None, within_matching_subtree: str | None,
                       within_reward: bool | None, within_llm_call: bool,
                       seen_response_ids: set[str]) -> list[tuple[TraceTree, str]]:
        """LLM calls (span name matches `llm_call_match`) with the agent they run under, depth first.

        A call counts inside an agent subtree matching `agent_match` (`within_matching_subtree` is that agent's
        name), not under a reward span when `within_reward` is tracked (False, not None), once per response
        id, and, nested inside another call, only with a response id of its own.
        """
        calls: list[tuple[TraceTree, str]] = []
        if (within_matching_subtree is not None and within_reward is not True
                and re.search(llm_call_match, self.span.name) is not None):
            response_id = first_string(self.span.attributes, RESPONSE_ID)
            inner_request = response_id is None and within_llm_call  # a wrapper's own client call, the same call
            if not inner_request and response_id not in seen_response_ids:
                calls.append((self, within_matching_subtree))
                if response_id is not None:
                    seen_response_ids.add(response_id)
                within_llm_call = True
        name = agent_name(self.span)
        if name is not None:
            within_matching_subtree = name if agent_match is None or re.search(agent_match, name) else None
        if within_reward is not None and is_reward_span(self.span):
            within_reward = True
        for child in self.children:
            calls.extend(child.find_llm_calls(
                llm_call_match=llm_call_match, agent_match=agent_match,
                within_matching_subtree=within_matching_subtree, within_reward=within_reward,
                within_llm_call=within_llm_call, seen_response_ids=seen_response_ids))
        return calls

    def match_rewards(self, reward_match: RewardMatchPolicy | str,
                      llm_calls: Iterable[TraceTree]) -> dict[str, float | None]:
        """Node id of an LLM call -> the reward matched to it under `reward_match` (calls without one are absent)."""
        call_ids = {call.id for call in llm_calls}
        rewards: dict[str, float | None] = {}
        if reward_match == RewardMatchPolicy.FIRST_OCCURRENCE:
            _assign_rewards(sorted(self.traverse(), key=lambda n: n.start_time), call_ids, rewards)  # type: ignore[arg-type,return-value]
        elif reward_match == RewardMatchPolicy.FIRST_SIBLING:
            for node in self.traverse():
                _assign_rewards(node.children, call_ids, rewards)
        return rewards

    def to_trajectory(self, *, llm_call_match: str = r"openai\.chat\.completion", agent_match: str | None = None,
                      exclude_llm_call_in_reward: bool = True,
                      reward_match: RewardMatchPolicy | str = RewardMatchPolicy.FIRST_OCCURRENCE,
                      _skip_empty_token_spans: bool = False) -> list[Triplet]:
        """One triplet per LLM call in tree order, each with its matched reward (or None)."""
        calls = self.find_llm_calls(
            llm_call_match=llm_call_match, agent_match=agent_match,
            within_matching_subtree=ANY_AGENT if agent_match is None else None,
            within_reward=False if exclude_llm_call_in_reward else None,
            within_llm_call=False, seen_response_ids=set())
        kept: list[tuple[TraceTree, Triplet]] = []
        for node, agent in calls:
            triplet = llm_call_triplet(node.span, agent)
            if _skip_empty_token_spans and (not triplet.prompt["token_ids"] or not triplet.response["token_ids"]):
                log.warning("Skipping LLM call with unrecorded token IDs: %s", triplet)
                continue
            kept.append((node, triplet))
        rewards = self.match_rewards(reward_match, [node for node, _ in kept])
        return [triplet.model_copy(update={"reward": rewards.get(node.id)}) for node, triplet in kept]


def _assign_rewards(nodes: Iterable[TraceTree], call_ids: set[str], rewards: dict[str, float | None]) -> None:
    """Walk `nodes` in order; each reward goes to the latest call seen so far that ended by the reward's start
    and has no reward yet."""
    calls_so_far: list[TraceTree] = []
    for node in nodes:
        if node.id in call_ids:
            calls_so_far.append(node)
        value = get_reward_value(node.span)
        if value is None:
            continue
        for call in reversed(calls_so_far):
            if call.end_time > node.start_time or call.id in rewards:  # type: ignore[operator]
                continue
            rewards[call.id] = value
            break

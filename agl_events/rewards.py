"""Reading rewards back from spans, in Agent Lightning's formats (contract §4)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from agl_events.types import Span

REWARD_SPAN = "agentlightning.annotation"


def reward_of(span: Span) -> float | None:
    """The primary reward a span carries: the 0.3.0 attributes first, then AgentOps and v0.2 formats."""
    value = span.attributes.get("agentlightning.reward.0.value")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    for key in ("agentops.task.output", "agentops.entity.output"):
        raw = span.attributes.get(key)
        if isinstance(raw, str):
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("type") == "reward":
                return float(data["value"])
    legacy = span.attributes.get("reward")
    if span.name == REWARD_SPAN and isinstance(legacy, (int, float)) and not isinstance(legacy, bool):
        return float(legacy)
    return None


def final_reward(spans: Sequence[Span]) -> float | None:
    """The last reward in sequence order, as upstream's `find_final_reward`."""
    found = None
    for span in sorted(spans, key=lambda s: s.sequence_id):
        value = reward_of(span)
        if value is not None:
            found = value
    return found

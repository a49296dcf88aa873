"""Reward spans, written and read exactly as agentlightning 0.3.0 `emitter/reward.py` does.

The trainer's adapters find rewards by these attributes, so `emit_reward(0.5)` here must produce the
same `agentlightning.annotation` span with `agentlightning.reward.0.name="primary"` and
`agentlightning.reward.0.value=0.5`. The readers are ported too, so our own code can find rewards
without importing agentlightning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Protocol, cast

from pydantic import TypeAdapter

from agl_events.emitter.annotation import emit_annotation
from agl_events.emitter.attributes import filter_and_unflatten_attributes
from agl_events.emitter.spans import SpanCoreFields
from agl_events.semconv import AGL_ANNOTATION, LightningSpanAttributes, RewardPydanticModel

log = logging.getLogger(__name__)


class SpanLike(Protocol):
    """Anything with a name and attributes: our Span, upstream's Span, an OpenTelemetry ReadableSpan."""

    @property
    def name(self) -> str: ...

    @property
    def attributes(self) -> Any: ...


def emit_reward(reward: float | dict[str, Any], *, primary_key: str | None = None,
                attributes: dict[str, Any] | None = None, propagate: bool = True) -> SpanCoreFields:
    """Record a reward as a span. A dict is a multi-dimensional reward whose `primary_key` comes first."""
    log.debug("Emitting reward: %s", reward)
    dimensions: list[dict[str, Any]] = []
    if isinstance(reward, dict):
        values: dict[str, float] = {}
        for k, v in reward.items():
            if isinstance(v, int | bool):
                values[k] = float(v)
            elif isinstance(v, float):
                values[k] = v
            else:
                raise ValueError(f"Reward value must be a number, got: {type(v)} for key {k}")
        if primary_key is None:
            raise ValueError("When emitting a multi-dimensional reward as a dict, primary_key must be provided.")
        if primary_key not in values:
            raise ValueError(f"Primary key '{primary_key}' not found in reward dict keys: {list(values.keys())}")
        dimensions.append({"name": primary_key, "value": values[primary_key]})
        dimensions.extend({"name": k, "value": v} for k, v in values.items() if k != primary_key)
    else:
        if isinstance(reward, int | bool):
            reward = float(reward)
        elif not isinstance(reward, float):
            raise TypeError(f"Reward must be a number, got: {type(reward)}")
        dimensions.append({"name": "primary", "value": reward})
    return emit_annotation({LightningSpanAttributes.REWARD.value: dimensions, **(attributes or {})},
                           propagate=propagate)


#: Built once: building it on every call took an eighth of a triplet export's time (bench.replay profile).
_REWARDS = TypeAdapter(list[RewardPydanticModel])


def get_rewards_from_span(span: SpanLike) -> list[RewardPydanticModel]:
    """All reward dimensions of a span, primary first; empty when it carries none."""
    attributes = dict(span.attributes or {})
    if any(key.startswith(LightningSpanAttributes.REWARD.value) for key in attributes):
        unflattened = filter_and_unflatten_attributes(attributes, LightningSpanAttributes.REWARD.value)
        return _REWARDS.validate_python(unflattened)
    return []


def get_reward_value(span: SpanLike) -> float | None:
    """The primary reward of a span: v0.3 format, then AgentOps output JSON, then the v0.2 `reward` attribute."""
    rewards = get_rewards_from_span(span)
    if rewards:
        return rewards[0].value
    attributes = span.attributes or {}
    for key in ("agentops.task.output", "agentops.entity.output"):
        output = attributes.get(key)
        parsed: dict[str, Any] | None = None
        if isinstance(output, dict):
            parsed = output
        elif isinstance(output, str) and output:
            try:
                parsed = json.loads(output)
            except json.JSONDecodeError:
                parsed = None
        if isinstance(parsed, dict) and parsed.get("type") == "reward":
            return cast(float | None, parsed.get("value"))
    if span.name == AGL_ANNOTATION and attributes:
        return cast(float | None, attributes.get("reward"))
    return None


def is_reward_span(span: SpanLike) -> bool:
    return get_reward_value(span) is not None


def find_reward_spans(spans: Sequence[SpanLike]) -> list[SpanLike]:
    return [span for span in spans if is_reward_span(span)]


def find_final_reward(spans: Sequence[SpanLike]) -> float | None:
    """The last reward in list order, which is why spans must be read in sequence-id order."""
    for span in reversed(spans):
        value = get_reward_value(span)
        if value is not None:
            return value
    return None

"""Span names and attribute keys that Agent Lightning's adapters look for.

Copied verbatim (values, not docs) from agentlightning 0.3.0 `agentlightning/semconv.py`, because
upstream's adapters (`TracerTraceToTriplet`, `find_final_reward`, ...) recognise spans by exactly
these strings: any drift and the trainer silently finds no rewards in our spans.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel

AGL_ANNOTATION = "agentlightning.annotation"
"""Span name for annotations (rewards, tags, metadata)."""

AGL_MESSAGE = "agentlightning.message"
"""Span name for messages and logs."""

AGL_OBJECT = "agentlightning.object"
"""Span name for custom objects."""

AGL_EXCEPTION = "agentlightning.exception"
"""Span name for recorded exceptions."""

AGL_OPERATION = "agentlightning.operation"
"""Span name for wrapped functions and code blocks."""

AGL_REWARD = "agentlightning.reward"
"""Attribute prefix of reward dimensions (it is not a span name)."""

AGL_VIRTUAL = "agentlightning.virtual"
"""Span name adapters use for synthetic roots."""


class LightningResourceAttributes(Enum):
    """Resource attribute names upstream's OTLP path uses to route spans to a rollout."""

    ROLLOUT_ID = "agentlightning.rollout_id"
    ATTEMPT_ID = "agentlightning.attempt_id"
    SPAN_SEQUENCE_ID = "agentlightning.span_sequence_id"
    TRACER_NAME = "agentlightning.tracer.name"


class LightningSpanAttributes(Enum):
    """Attribute names that appear in Agent Lightning's own spans."""

    REWARD = "agentlightning.reward"
    LINK = "agentlightning.link"
    TAG = "agentlightning.tag"
    MESSAGE_BODY = "agentlightning.message.body"
    OBJECT_TYPE = "agentlightning.object.type"
    OBJECT_LITERAL = "agentlightning.object.literal"
    OBJECT_JSON = "agentlightning.object.json"
    OPERATION_NAME = "agentlightning.operation.name"
    OPERATION_INPUT = "agentlightning.operation.input"
    OPERATION_OUTPUT = "agentlightning.operation.output"


class RewardAttributes(Enum):
    """Keys of each reward dimension: `agentlightning.reward.<i>.name` / `.value`; index 0 is the primary."""

    REWARD_NAME = "name"
    REWARD_VALUE = "value"


class RewardPydanticModel(BaseModel):
    """One reward dimension as read back from a span."""

    name: str
    value: float


class LinkAttributes(Enum):
    """Keys of an `agentlightning.link.<i>` entry."""

    KEY_MATCH = "key_match"
    VALUE_MATCH = "value_match"


class LinkPydanticModel(BaseModel):
    """One link as read back from a span."""

    key_match: str
    value_match: str

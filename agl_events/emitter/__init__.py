"""Emitters: rewards, messages, objects, exceptions and operations as OpenTelemetry spans.

Names and attribute keys are upstream's (agentlightning 0.3.0 `emitter/`), so upstream's adapters
read what these write. Spans go to the active KafkaTracer's provider, else the global SDK provider.
"""

from agl_events.emitter.annotation import emit_annotation
from agl_events.emitter.attributes import make_link_attributes, make_tag_attributes
from agl_events.emitter.exception import emit_exception
from agl_events.emitter.message import emit_message, get_message_value
from agl_events.emitter.object import emit_object, get_object_value
from agl_events.emitter.operation import OperationContext, operation
from agl_events.emitter.reward import (
    emit_reward,
    find_final_reward,
    find_reward_spans,
    get_reward_value,
    get_rewards_from_span,
    is_reward_span,
)
from agl_events.emitter.spans import SpanCoreFields, set_active_provider

__all__ = [
    "OperationContext",
    "SpanCoreFields",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_message_value",
    "get_object_value",
    "get_reward_value",
    "get_rewards_from_span",
    "is_reward_span",
    "make_link_attributes",
    "make_tag_attributes",
    "operation",
    "set_active_provider",
]

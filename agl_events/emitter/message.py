"""Message spans (upstream `emit_message`): logs kept next to the trace they explain."""

from __future__ import annotations

import logging
from typing import Any

from agl_events.emitter.attributes import flatten_attributes, sanitize_attributes
from agl_events.emitter.reward import SpanLike
from agl_events.emitter.spans import create_span
from agl_events.semconv import AGL_MESSAGE, LightningSpanAttributes

log = logging.getLogger(__name__)


def emit_message(message: str, attributes: dict[str, Any] | None = None, propagate: bool = True) -> None:
    """Emit an `agentlightning.message` span whose body is `message` (status left UNSET, as upstream)."""
    if not isinstance(message, str):
        raise TypeError(f"Message must be a string or list of strings, got: {type(message)}.")
    span_attributes: dict[str, Any] = {LightningSpanAttributes.MESSAGE_BODY.value: message}
    if attributes:
        span_attributes.update(sanitize_attributes(flatten_attributes(attributes, expand_leaf_lists=False)))
    log.debug("Emitting message span with message: %s", message)
    create_span(AGL_MESSAGE, span_attributes, propagate=propagate)


def get_message_value(span: SpanLike) -> str | None:
    attributes = span.attributes or {}
    if LightningSpanAttributes.MESSAGE_BODY.value not in attributes:
        return None
    message = attributes[LightningSpanAttributes.MESSAGE_BODY.value]
    if isinstance(message, str):
        return message
    raise TypeError(f"Message must be a string, got: {type(message)}.")

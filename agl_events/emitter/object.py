"""Object spans (upstream `emit_object`): any JSON-able value, typed so it can be decoded again."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from agl_events.emitter.attributes import flatten_attributes, full_qualified_name, sanitize_attributes
from agl_events.emitter.reward import SpanLike
from agl_events.emitter.spans import SpanCoreFields, create_span
from agl_events.semconv import AGL_OBJECT, LightningSpanAttributes
from agl_events.types import TraceStatus

log = logging.getLogger(__name__)

TYPE = LightningSpanAttributes.OBJECT_TYPE.value
LITERAL = LightningSpanAttributes.OBJECT_LITERAL.value
JSON = LightningSpanAttributes.OBJECT_JSON.value


def encode_object(obj: Any) -> dict[str, Any]:
    """Primitives as literals, bytes as base64, the rest as JSON; RuntimeError if not JSON-able."""
    if isinstance(obj, str | int | float | bool):
        return {TYPE: type(obj).__name__, LITERAL: str(obj)}
    if isinstance(obj, bytes):
        return {TYPE: "bytes", LITERAL: base64.b64encode(obj).decode("utf-8")}
    try:
        serialized = json.dumps(obj)
    except (TypeError, ValueError) as exc:
        raise RuntimeError(f"Object must be JSON serializable, got: {type(obj)}.") from exc
    return {TYPE: full_qualified_name(type(obj)), JSON: serialized}


def emit_object(object: Any, attributes: dict[str, Any] | None = None,  # `object`: upstream's keyword
                propagate: bool = True) -> SpanCoreFields:
    """Emit an `agentlightning.object` span (status OK) carrying `object`."""
    span_attributes = encode_object(object)
    if attributes:
        span_attributes.update(sanitize_attributes(flatten_attributes(attributes, expand_leaf_lists=False)))
    log.debug("Emitting object span with payload size %d characters",
              len(span_attributes.get(JSON) or span_attributes.get(LITERAL) or ""))
    return create_span(AGL_OBJECT, span_attributes, TraceStatus(status_code="OK"), propagate=propagate)


def get_object_value(span: SpanLike) -> Any:
    """Decode what `emit_object` stored; None when the span is not an object span."""
    attributes = span.attributes or {}
    if JSON in attributes:
        try:
            return json.loads(attributes[JSON])
        except (TypeError, ValueError) as exc:
            raise RuntimeError("Failed to deserialize object JSON from span.") from exc
    if LITERAL in attributes:
        literal = attributes[LITERAL]
        kind = attributes.get(TYPE, "str")
        decoders = {"str": str, "int": int, "float": float, "bool": lambda s: s.lower() == "true",
                    "bytes": lambda s: base64.b64decode(s.encode("utf-8"))}
        if kind not in decoders:
            raise RuntimeError(f"Unsupported object type for literal deserialization: {kind}")
        return decoders[kind](literal)
    return None

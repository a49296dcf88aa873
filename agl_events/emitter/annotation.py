"""Annotation spans (upstream `emit_annotation`): the carrier of rewards, tags and links."""

from __future__ import annotations

import logging
from typing import Any

from agl_events.emitter.attributes import check_attributes_sanity, flatten_attributes, sanitize_attributes
from agl_events.emitter.spans import SpanCoreFields, create_span
from agl_events.semconv import AGL_ANNOTATION
from agl_events.types import TraceStatus

log = logging.getLogger(__name__)


def emit_annotation(annotation: dict[str, Any], propagate: bool = True) -> SpanCoreFields:
    """Emit an `agentlightning.annotation` span with status OK and the annotation flattened.

    Nested values are flattened first and checked strictly, because a value OpenTelemetry drops would
    be a reward the trainer never sees.
    """
    flattened = flatten_attributes(annotation, expand_leaf_lists=False)
    check_attributes_sanity(flattened)
    attributes = sanitize_attributes(flattened)
    log.debug("Emitting annotation span with keys %s", attributes.keys())
    return create_span(AGL_ANNOTATION, attributes, TraceStatus(status_code="OK"), propagate=propagate)

"""Exception spans (upstream `emit_exception`): errors recorded in the trace rather than a log service."""

from __future__ import annotations

import logging
from typing import Any

from agl_events.emitter.attributes import flatten_attributes, format_exception_attributes, sanitize_attributes
from agl_events.emitter.spans import create_span
from agl_events.semconv import AGL_EXCEPTION
from agl_events.types import TraceStatus

log = logging.getLogger(__name__)


def emit_exception(exception: BaseException, attributes: dict[str, Any] | None = None,
                   propagate: bool = True) -> None:
    """Emit an `agentlightning.exception` span; its status is OK because recording succeeded (as upstream)."""
    if not isinstance(exception, BaseException):
        raise TypeError(f"Expected a BaseException instance, got: {type(exception)}.")
    span_attributes = format_exception_attributes(exception)
    if attributes:
        span_attributes.update(sanitize_attributes(flatten_attributes(attributes, expand_leaf_lists=False)))
    log.debug("Emitting exception span for %s", type(exception).__name__)
    create_span(AGL_EXCEPTION, span_attributes, TraceStatus(status_code="OK"), propagate=propagate)

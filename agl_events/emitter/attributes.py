"""Attribute helpers ported from agentlightning 0.3.0 `agentlightning/utils/otel.py`.

OpenTelemetry attributes are flat and primitive, while rewards, links and operation inputs are
nested. Upstream flattens them with dotted keys (`agentlightning.reward.0.value`) and its adapters
unflatten them the same way, so these must behave exactly like upstream's, corner cases included.
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

from agl_events.semconv import LightningSpanAttributes, LinkAttributes

log = logging.getLogger(__name__)

# Semantic-convention keys from opentelemetry.semconv.attributes.exception_attributes (a dependency we
# do not need for four strings).
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_ESCAPED = "exception.escaped"
EXCEPTION_STACKTRACE = "exception.stacktrace"


def full_qualified_name(obj: type) -> str:
    if str(obj.__module__) == "builtins":
        return obj.__qualname__
    return f"{obj.__module__}.{obj.__qualname__}"


def _primitive_type(value: Any) -> type:
    if isinstance(value, bool):
        return bool
    if isinstance(value, int):
        return int
    if isinstance(value, float):
        return float
    return str


def flatten_attributes(nested: dict[str, Any] | list[Any], *, expand_leaf_lists: bool = False) -> dict[str, Any]:
    """Dotted keys for nested dicts and lists; homogeneous primitive lists stay whole unless expanded.

    Every emitted operation and annotation passes here, so a dict's primitive values are stored in its own loop
    rather than through a call each (upstream's recursion, and ours, cost more than the span's OpenTelemetry
    attributes); what comes out is upstream's, key for key and in its order."""
    flat: dict[str, Any] = {}
    _walk(flat, nested, "", expand_leaf_lists)
    return flat


def _walk(flat: dict[str, Any], value: Any, prefix: str, expand_leaf_lists: bool) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(
                    f"Only string keys are supported in dictionaries, got '{k}' of type {type(k)} in {prefix}")
            key = f"{prefix}.{k}" if prefix else k
            kind = type(v)
            if kind is str or kind is int or kind is float or kind is bool or v is None:  # neither dict nor list
                flat[key] = v
            else:
                _walk(flat, v, key, expand_leaf_lists)
    elif isinstance(value, list):
        leafy = bool(value) and all(isinstance(item, str | int | float | bool) for item in value)
        if not expand_leaf_lists and leafy and prefix:
            kinds = {_primitive_type(item) for item in value}
            if len(kinds) == 1:
                flat[prefix] = value
                return
            log.warning("List attribute '%s' contains mixed primitive types %s; expanding indexed keys instead.",
                        prefix, kinds)
        for idx, item in enumerate(value):
            _walk(flat, item, f"{prefix}.{idx}" if prefix else str(idx), expand_leaf_lists)
    else:
        flat[prefix] = value


def unflatten_attributes(flat: dict[str, Any]) -> dict[str, Any] | list[Any]:
    """Inverse of flatten: dicts whose keys are exactly 0..n-1 become lists."""
    root: dict[str, Any] = {}
    for flat_key, value in flat.items():
        parts = flat_key.split(".")
        node = root
        for part in parts[:-1]:
            if part not in node or not isinstance(node[part], dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value

    def convert(node: Any) -> Any:
        if isinstance(node, dict):
            for k, v in list(node.items()):
                node[k] = convert(v)
            if node and all(k.isdigit() for k in node):
                indices = sorted(int(k) for k in node)
                if indices == list(range(len(indices))):
                    return [node[str(i)] for i in indices]
            return node
        if isinstance(node, list):
            return [convert(v) for v in node]
        return node

    return convert(root)


def filter_attributes(attributes: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k.startswith(prefix + ".") or k == prefix}


def filter_and_unflatten_attributes(attributes: dict[str, Any], prefix: str) -> dict[str, Any] | list[Any]:
    stripped: dict[str, Any] = {}
    for k, v in filter_attributes(attributes, prefix).items():
        if k == prefix:
            raise ValueError(f"Cannot unflatten attribute with key exactly equal to prefix: {prefix}")
        stripped[k[len(prefix) + 1:]] = v
    return unflatten_attributes(stripped)


def sanitize_list_attribute(values: list[Any]) -> list[Any]:
    """A list OpenTelemetry accepts (one primitive type), or ValueError."""
    if all(isinstance(item, str) for item in values):
        return list(values)
    if all(isinstance(item, bool) for item in values):
        return list(values)
    if all(isinstance(item, int | bool) for item in values):
        return [int(item) for item in values]
    if all(isinstance(item, float | int | bool) for item in values):
        return [float(item) for item in values]
    raise ValueError(f"List must contain only one type of primitive values, got: {({type(i) for i in values})}.")


def sanitize_attribute_value(value: Any, force: bool = True) -> Any:
    """Primitives pass; lists are made homogeneous; anything else becomes JSON text (str() as last resort)."""
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list):
        try:
            return sanitize_list_attribute(value)
        except ValueError as exc:
            log.warning("Failed to sanitize list attribute. Fallback to JSON serialization: %s", exc)
    try:
        return json.dumps(value, default=str if force else None)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Object must be JSON serializable, got: {type(value)}.") from exc


def sanitize_attributes(attributes: dict[str, Any], force: bool = True) -> dict[str, Any]:
    """Each value as `sanitize_attribute_value` makes it; primitives, nearly all of them, without the call."""
    result: dict[str, Any] = {}
    for k, v in attributes.items():
        kind = type(v)
        if kind is str or kind is int or kind is float or kind is bool:
            result[k] = v
            continue
        try:
            result[k] = sanitize_attribute_value(v, force=force)
        except ValueError as exc:
            raise ValueError(f"Failed to sanitize attribute '{k}': {exc}") from exc
    return result


def check_attributes_sanity(attributes: dict[Any, Any]) -> None:
    """Reject what OpenTelemetry would silently drop, so an annotation never loses its reward."""
    for k, v in attributes.items():
        if not isinstance(k, str):
            raise ValueError(f"Attribute key must be a string, got {type(k)} for key '{k}'")
        if isinstance(v, list):
            try:
                sanitize_list_attribute(v)
            except ValueError as exc:
                raise ValueError(f"Failed to sanitize list attribute '{k}': {exc}") from exc
        elif not isinstance(v, str | int | float | bool):
            raise ValueError(
                f"Attribute value must be a string, int, float, bool, or list of these, got {type(v)} for value '{v}'")


def format_exception_attributes(exception: BaseException) -> dict[str, Any]:
    stacktrace = "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))
    attributes: dict[str, Any] = {
        EXCEPTION_TYPE: type(exception).__name__,
        EXCEPTION_MESSAGE: str(exception),
        EXCEPTION_ESCAPED: True,
    }
    if stacktrace.strip():
        attributes[EXCEPTION_STACKTRACE] = stacktrace
    return attributes


def make_tag_attributes(tags: list[str]) -> dict[str, Any]:
    """Tags for `emit_reward(..., attributes=...)`: `agentlightning.tag.<i>`."""
    return flatten_attributes({LightningSpanAttributes.TAG.value: tags}, expand_leaf_lists=True)


def make_link_attributes(links: dict[str, str]) -> dict[str, Any]:
    """Links for `emit_reward(..., attributes=...)`, e.g. `{"gen_ai.response.id": "resp-1"}`."""
    entries: list[dict[str, str]] = []
    for key, value in links.items():
        if not isinstance(value, str):
            raise ValueError(f"Link value must be a string, got {type(value)} for key '{key}'")
        entries.append({LinkAttributes.KEY_MATCH.value: key, LinkAttributes.VALUE_MATCH.value: value})
    return flatten_attributes({LightningSpanAttributes.LINK.value: entries}, expand_leaf_lists=True)

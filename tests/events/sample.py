"""Sample records for any Avro schema, so every event kind is exercised without hand-written fixtures."""

from __future__ import annotations

from typing import Any

_PRIMITIVE_SAMPLES: dict[str, Any] = {
    "null": None, "boolean": True, "int": 7, "long": 2**40, "float": 0.5, "double": 1234.5,
    "bytes": b"\x00\xff", "string": "héllo ✓",
}


def sample(schema: Any, named: dict[str, Any] | None = None, richest: bool = True) -> Any:
    """A value valid for `schema`; unions take their richest branch so nested records are exercised."""
    named = {} if named is None else named
    if isinstance(schema, str):
        return _PRIMITIVE_SAMPLES[schema] if schema in _PRIMITIVE_SAMPLES else sample(named[schema], named)
    if isinstance(schema, list):
        branch = schema[-1] if richest else schema[0]
        return sample(branch, named)
    kind = schema["type"]
    if kind == "record":
        named[schema["name"]] = named[f"{schema.get('namespace', 'agl.events')}.{schema['name']}"] = schema
        return {f["name"]: sample(f["type"], named) for f in schema["fields"]}
    if kind == "array":
        return [sample(schema["items"], named)]
    if kind == "map":
        return {"k": sample(schema["values"], named)}
    if kind == "enum":
        return schema["symbols"][0]
    return sample(kind, named)

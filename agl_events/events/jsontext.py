"""Arbitrary JSON (task input, metadata, resources, heartbeat stats, extra span fields) as the JSON text the
records carry, so the schemas stay stable while users put anything they like in them."""

from __future__ import annotations

from typing import Any

import orjson


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def loads_optional(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)

"""Ordered key-value storage behind the view: the contract, and a dict for tests (RocksDB is `views.rocks`).

Values are JSON (orjson), or bytes kept as they are (a span's encoded record: `reducers.spans`). A batch of
changes is written atomically, together with the log positions it brings the view to, so a crash leaves either
the old view and positions or the new ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import orjson

#: Marks a stored value that is bytes, not JSON: no JSON text starts with this byte.
BYTES_TAG = b"\x00"


def dump_value(value: Any) -> bytes:
    """What the storage keeps for `value`: bytes behind BYTES_TAG, anything else as JSON."""
    return BYTES_TAG + value if isinstance(value, bytes) else orjson.dumps(value)


def load_value(stored: bytes) -> Any:
    """The value `dump_value` stored."""
    return stored[1:] if stored[:1] == BYTES_TAG else orjson.loads(stored)


class KeyValue(Protocol):
    def get(self, key: str) -> Any: ...

    def scan(self, prefix: str, start: str | None = None) -> Iterator[tuple[str, Any]]:
        """The entries under `prefix` in key order, from `start` (a key under it) when given."""
        ...

    def write(self, changes: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class DictKV:
    """In-memory KeyValue; scans sort on demand, which is fine for tests and small experiments."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def get(self, key: str) -> Any:
        raw = self._data.get(key)
        return None if raw is None else load_value(raw)

    def scan(self, prefix: str, start: str | None = None) -> Iterator[tuple[str, Any]]:
        first = start or prefix
        for key in sorted(k for k in self._data if k.startswith(prefix) and k >= first):
            raw = self._data.get(key)
            if raw is not None:
                yield key, load_value(raw)

    def write(self, changes: Mapping[str, Any]) -> None:
        for key, value in changes.items():
            if value is None:
                self._data.pop(key, None)
            else:
                self._data[key] = dump_value(value)

    def close(self) -> None:
        self._data.clear()

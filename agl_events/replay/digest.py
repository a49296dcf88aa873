"""An order-independent digest of a store's contents, read through its query API, and where two differ.

Through the API, not the RocksDB keys: the live store is reached over HTTP (`StoreClient`), a rebuilt view
in-process (`ReadOnlyStore`), and both answer with the same models, so equal digests mean a client could not
tell the two apart. One hash per rollout part (the rollout, its attempts, its spans) and per resources id and
worker, each over canonical JSON (sorted keys, list items sorted by their JSON): which partition an event
came from, or the order two were folded in, changes no digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from pydantic import BaseModel


class QueryableStore(Protocol):
    """The reads a digest needs: what `EventSourcedStore` and `StoreClient` both offer."""

    async def query_rollouts(self) -> Sequence[BaseModel]: ...

    async def query_attempts(self, rollout_id: str) -> Sequence[BaseModel]: ...

    async def query_spans(self, rollout_id: str) -> Sequence[BaseModel]: ...

    async def query_resources(self) -> Sequence[BaseModel]: ...

    async def query_workers(self) -> Sequence[BaseModel]: ...


@dataclass
class Digest:
    """Per-part hashes (`rollout/<id>`, `attempts/<id>`, `spans/<id>`, `resources/<id>`, `worker/<id>`) and counts."""

    parts: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def value(self) -> str:
        """The digest of the whole: over the sorted parts, so independent of the order they were read in."""
        lines = "".join(f"{key}\t{self.parts[key]}\n" for key in sorted(self.parts))
        return hashlib.sha256(lines.encode()).hexdigest()

    def first_difference(self, other: Digest) -> str | None:
        """The first part (in key order) that differs, or is in one digest only; None when they are equal."""
        for key in sorted(self.parts.keys() | other.parts.keys()):
            if self.parts.get(key) != other.parts.get(key):
                return key
        return None


def canonical(items: Iterable[BaseModel], exclude: set[str] | None = None) -> list[Any]:
    """Models as JSON-ready data in an order of their own (by their JSON): the same set gives the same list."""
    dumped = [item.model_dump(mode="json", exclude=exclude) for item in items]
    return sorted(dumped, key=lambda d: orjson.dumps(d, option=orjson.OPT_SORT_KEYS))


def _hash(data: Any) -> str:
    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


async def digest(store: QueryableStore) -> Digest:
    """Read everything through the store's queries and hash it part by part."""
    out = Digest()
    rollouts = canonical(await store.query_rollouts(), exclude={"attempt"})
    out.counts = {"rollouts": len(rollouts), "attempts": 0, "spans": 0}
    for rollout in rollouts:
        rid = rollout["rollout_id"]
        out.parts[f"rollout/{rid}"] = _hash(rollout)
        attempts = canonical(await store.query_attempts(rid))
        spans = canonical(await store.query_spans(rid))
        out.parts[f"attempts/{rid}"], out.parts[f"spans/{rid}"] = _hash(attempts), _hash(spans)
        out.counts["attempts"] += len(attempts)
        out.counts["spans"] += len(spans)
    for kind, id_field, items in (("resources", "resources_id", await store.query_resources()),
                                  ("worker", "worker_id", await store.query_workers())):
        listed = canonical(items)
        out.counts[kind] = len(listed)
        out.parts.update((f"{kind}/{item[id_field]}", _hash(item)) for item in listed)
    return out


async def part_of(store: QueryableStore, key: str) -> Any:
    """The data behind one digest part (to show what differs), or None where the store has no such part."""
    kind, _, ident = key.partition("/")
    if kind == "rollout":
        found = [r for r in canonical(await store.query_rollouts(), exclude={"attempt"}) if r["rollout_id"] == ident]
        return found[0] if found else None
    if kind == "attempts":
        return canonical(await store.query_attempts(ident))
    if kind == "spans":
        return canonical(await store.query_spans(ident))
    items, id_field = ((await store.query_resources(), "resources_id") if kind == "resources"
                       else (await store.query_workers(), "worker_id"))
    found = [item for item in canonical(items) if item[id_field] == ident]
    return found[0] if found else None


def first_field_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """Where two JSON values first differ: (path, value in a, value in b); None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            found = first_field_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_field_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else (path or "(whole)", a, b)

"""Loading the event schemas from `schemas/` (packaged with the code as `agl_events/_schemas`).

Event schemas (`schemas/*.avsc`) refer to shared named types (`schemas/types/*.avsc`) by full name.
We inline each referenced type at its first use, giving every event one self-contained schema whose
parsing canonical form, and so its CRC-64-AVRO fingerprint, does not depend on how files are split.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import fingerprint, to_parsing_canonical_form

from agl_events.config import data_dir

#: `schemas/` of the repository, or its copy in the installed package.
SCHEMAS_DIR = data_dir("_schemas", "schemas")
NAMESPACE = "agl.events"
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}

Schema = Any  # a JSON Avro schema: str, list (union) or dict


def _full_name(name: str) -> str:
    return name if "." in name else f"{NAMESPACE}.{name}"


def load_named_types(types_dir: Path) -> dict[str, dict[str, Any]]:
    """Shared named types by full name (`agl.events.Rollout` -> its record schema)."""
    named: dict[str, dict[str, Any]] = {}
    for path in sorted(types_dir.glob("*.avsc")):
        schema = json.loads(path.read_text())
        named[_full_name(schema.get("namespace", NAMESPACE) + "." + schema["name"])] = schema
    return named


def inline_named_types(schema: Schema, named: Mapping[str, dict[str, Any]]) -> Schema:
    """Return `schema` with every reference to a shared type replaced by its definition at first use."""
    defined: set[str] = set()

    def walk(node: Schema) -> Schema:
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return node
            full = _full_name(node)
            if full in defined or full not in named:
                return node  # already defined above, or left for fastavro to report as unknown
            defined.add(full)
            return walk(copy.deepcopy(named[full]))
        if isinstance(node, list):
            return [walk(branch) for branch in node]
        if isinstance(node, dict):
            kind = node.get("type")
            if kind in ("record", "error"):
                defined.add(_full_name(node.get("namespace", NAMESPACE) + "." + node["name"]))
                return {**node, "fields": [{**f, "type": walk(f["type"])} for f in node["fields"]]}
            if kind == "array":
                return {**node, "items": walk(node["items"])}
            if kind == "map":
                return {**node, "values": walk(node["values"])}
            if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in _PRIMITIVES
                                                   and kind not in ("enum", "fixed")):
                return {**node, "type": walk(kind)}
        return node

    return walk(schema)


@dataclass(frozen=True)
class EventSchema:
    """One event kind: its name, full JSON schema, parsed form and single-object fingerprint."""

    name: str
    full_name: str
    schema: dict[str, Any]
    parsed: Any = field(repr=False)
    fingerprint: bytes

    @property
    def canonical(self) -> str:
        return to_parsing_canonical_form(self.schema)


def build_event_schema(schema: dict[str, Any]) -> EventSchema:
    """Parse a self-contained event schema and compute its CRC-64-AVRO fingerprint.

    fastavro returns the fingerprint's bytes little endian, the order single-object encoding wants.
    """
    parsed = parse_schema(copy.deepcopy(schema))
    digest = bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))
    return EventSchema(
        name=schema["name"],
        full_name=_full_name(schema.get("namespace", NAMESPACE) + "." + schema["name"]),
        schema=schema,
        parsed=parsed,
        fingerprint=digest,
    )


@dataclass(frozen=True)
class EventSchemas:
    """Every event kind of the contract by short name, and every known writer schema by fingerprint.

    `by_fingerprint` also holds the earlier versions kept in `schemas/history/`, so records written
    by older producers still decode (into the current shape, by Avro schema resolution).
    """

    by_name: Mapping[str, EventSchema]
    by_fingerprint: Mapping[bytes, EventSchema]

    def __getitem__(self, name: str) -> EventSchema:
        return self.by_name[name]

    def __iter__(self) -> Iterator[EventSchema]:
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)


def read_history(history_dir: Path) -> dict[str, list[EventSchema]]:
    """Earlier versions per event kind: `history/<Name>/v<N>.avsc`, each already self-contained."""
    versions: dict[str, list[EventSchema]] = {}
    for path in sorted(history_dir.glob("*/v*.avsc"), key=lambda p: (p.parent.name, int(p.stem[1:]))):
        versions.setdefault(path.parent.name, []).append(build_event_schema(json.loads(path.read_text())))
    return versions


def read_event_schemas(schemas_dir: Path) -> EventSchemas:
    """Load every `*.avsc` event schema in `schemas_dir`, resolving `types/`, plus `history/`."""
    named = load_named_types(schemas_dir / "types")
    by_name: dict[str, EventSchema] = {}
    for path in sorted(schemas_dir.glob("*.avsc")):
        event = build_event_schema(inline_named_types(json.loads(path.read_text()), named))
        by_name[event.name] = event
    by_fingerprint = {
        old.fingerprint: old for olds in read_history(schemas_dir / "history").values() for old in olds
    }
    by_fingerprint.update({s.fingerprint: s for s in by_name.values()})
    return EventSchemas(by_name, by_fingerprint)


@cache
def load_event_schemas() -> EventSchemas:
    """The project's event schemas (cached: they are immutable for the life of a process)."""
    return read_event_schemas(SCHEMAS_DIR)

"""Schema evolution: can the current schema of each event read everything its earlier versions wrote?

The rules are Avro's schema resolution (specification, "Schema Resolution"), checked structurally so
that a failure names the field path and the reason instead of failing at decode time in production.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agl_events.events.schemas import NAMESPACE, EventSchemas, read_event_schemas, read_history

_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


@dataclass(frozen=True)
class Incompatibility:
    """One reason the reader cannot read what the writer wrote."""

    event: str
    version: str
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.event} cannot read {self.version}: at {self.path}: {self.reason}"


class _Names:
    """Named types seen so far on one side, so later references by name resolve to definitions."""

    def __init__(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}

    def resolve(self, node: Any, namespace: str) -> Any:
        if isinstance(node, str) and node not in _PRIMITIVES:
            full = node if "." in node else f"{namespace}.{node}"
            return self.defs.get(full, node)
        if isinstance(node, dict) and node.get("type") in ("record", "enum", "fixed"):
            ns = node.get("namespace", namespace)
            self.defs[f"{ns}.{node['name']}"] = node
        if isinstance(node, dict) and isinstance(node.get("type"), (dict, list)):
            return self.resolve(node["type"], namespace)
        if isinstance(node, dict) and node.get("type") in _PRIMITIVES and len(node) == 1:
            return node["type"]
        return node


def _kind(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return str(node["type"])


def check_pair(reader: Any, writer: Any) -> list[tuple[str, str]]:
    """(path, reason) for each way `reader` fails to read data written with `writer`; [] if compatible."""
    return _check(reader, writer, _Names(), _Names(), "$")


def _check(reader: Any, writer: Any, rn: _Names, wn: _Names, path: str) -> list[tuple[str, str]]:
    reader, writer = rn.resolve(reader, NAMESPACE), wn.resolve(writer, NAMESPACE)
    rk, wk = _kind(reader), _kind(writer)
    if wk == "union":
        return [p for branch in writer for p in _check_branch_into(reader, branch, rn, wn, path)]
    if rk == "union":
        return _check_branch_into(reader, writer, rn, wn, path)
    if wk in _PRIMITIVES or rk in _PRIMITIVES:
        ok = rk in _PROMOTIONS.get(wk, {wk})
        return [] if ok else [(path, f"writer type {wk} cannot be read as {rk}")]
    if rk != wk:
        return [(path, f"writer type {wk} cannot be read as {rk}")]
    if rk == "record":
        return _check_record(reader, writer, rn, wn, path)
    if rk == "array":
        return _check(reader["items"], writer["items"], rn, wn, f"{path}[]")
    if rk == "map":
        return _check(reader["values"], writer["values"], rn, wn, f"{path}{{}}")
    if rk == "enum":
        missing = set(writer["symbols"]) - set(reader["symbols"])
        if missing and "default" not in reader:
            return [(path, f"enum symbols {sorted(missing)} were removed and the enum has no default")]
        return []
    if rk == "fixed" and (reader["size"] != writer["size"] or reader["name"] != writer["name"]):
        return [(path, "fixed types differ in name or size")]
    return []


def _check_branch_into(reader: Any, branch: Any, rn: _Names, wn: _Names, path: str) -> list[tuple[str, str]]:
    """A single writer branch must be readable by the reader (by some branch if the reader is a union)."""
    candidates = reader if isinstance(reader, list) else [reader]
    failures: list[tuple[str, str]] = []
    for candidate in candidates:
        problems = _check(candidate, branch, rn, wn, path)
        if not problems:
            return []
        failures.extend(problems)
    if isinstance(reader, list):
        return [(path, f"no branch of the reader's union can read the writer's {_kind(wn.resolve(branch, NAMESPACE))}")]
    return failures


def _check_record(reader: dict[str, Any], writer: dict[str, Any], rn: _Names, wn: _Names, path: str
                  ) -> list[tuple[str, str]]:
    if reader["name"] != writer["name"] and writer["name"] not in reader.get("aliases", []):
        return [(path, f"record {writer['name']} cannot be read as record {reader['name']}")]
    written = {f["name"]: f for f in writer["fields"]}
    for f in writer["fields"]:
        for alias in f.get("aliases", []):
            written.setdefault(alias, f)
    problems: list[tuple[str, str]] = []
    for field in reader["fields"]:
        source = written.get(field["name"]) or next(
            (written[a] for a in field.get("aliases", []) if a in written), None
        )
        if source is None:
            if "default" not in field:
                problems.append((f"{path}.{field['name']}", "field added without a default"))
            continue
        problems.extend(_check(field["type"], source["type"], rn, wn, f"{path}.{field['name']}"))
    return problems


def check_backward_compatibility(schemas_dir: Path) -> list[Incompatibility]:
    """Every incompatibility between each current event schema and each of its kept earlier versions."""
    current: EventSchemas = read_event_schemas(schemas_dir)
    problems: list[Incompatibility] = []
    for name, versions in read_history(schemas_dir / "history").items():
        if name not in current.by_name:
            problems.append(Incompatibility(name, "all versions", "$", "the event kind was removed"))
            continue
        for number, old in enumerate(versions, start=1):
            for path, reason in check_pair(current[name].schema, old.schema):
                problems.append(Incompatibility(name, f"v{number}", path, reason))
    return problems


def snapshot_history(schemas_dir: Path) -> list[Path]:
    """Keep the current version of each schema in history when it differs from the newest kept one."""
    current = read_event_schemas(schemas_dir)
    history = read_history(schemas_dir / "history")
    written: list[Path] = []
    for schema in current:
        kept = history.get(schema.name, [])
        if kept and kept[-1].fingerprint == schema.fingerprint:
            continue
        target = schemas_dir / "history" / schema.name / f"v{len(kept) + 1}.avsc"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(schema.schema, indent=2) + "\n")
        written.append(target)
    return written

"""Each typed event class (`events.typed`) against its Avro schema (`schemas/`), field by field, both ways.

A field added to, removed from or renamed in either side, or a type that differs (`int` for a `double`, a
missing `| None` for a nullable field), fails here, naming the record and the field, instead of when the codec
first meets such an event. Nested records are checked the same way, whether the class is a dataclass or a
TypedDict. Defaults agree too, except the header a decider leaves to `stamp`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from agl_events.events.codec import AvroCodec
from agl_events.events.kinds import KINDS
from agl_events.events.schemas import load_event_schemas
from agl_events.events.typed import Decided
from tests.events.sample import sample

SCHEMAS = load_event_schemas()
_AVRO_PRIMITIVES = {"string": "str", "double": "float", "float": "float", "long": "int", "int": "int",
                    "boolean": "bool", "bytes": "bytes", "null": "None"}
_PY_PRIMITIVES = {str: "str", float: "float", int: "int", bool: "bool", bytes: "bytes", type(None): "None"}
#: Set by `Decided.stamp` when the event is appended; the schemas give them no default.
_HEADER = {f.name for f in dataclasses.fields(Decided)}

Shape = Any  # "str", ("list", Shape), ("dict", Shape), ("record", name) or a frozenset of shapes (a union)


def _union(shapes: list[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else frozenset(shapes)


def avro_shape(schema: Any, named: dict[str, dict[str, Any]]) -> Shape:
    """The shape of an Avro type; records met on the way are collected in `named` by short name."""
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        return ("record", schema.rsplit(".", 1)[-1])  # a reference to a record defined earlier
    if isinstance(schema, list):
        return _union([avro_shape(branch, named) for branch in schema])
    kind = schema["type"]
    if kind == "record":
        named[schema["name"]] = schema
        return ("record", schema["name"])
    if kind == "array":
        return ("list", avro_shape(schema["items"], named))
    if kind == "map":
        return ("dict", avro_shape(schema["values"], named))
    return avro_shape(kind, named)


def python_shape(hint: Any, classes: dict[str, type]) -> Shape:
    """The shape of a type hint; record classes met on the way are collected in `classes` by name."""
    if isinstance(hint, types.UnionType) or get_origin(hint) is Union:
        return _union([python_shape(arg, classes) for arg in get_args(hint)])
    if get_origin(hint) is list:
        return ("list", python_shape(get_args(hint)[0], classes))
    if get_origin(hint) is dict:
        key, value = get_args(hint)
        assert key is str, f"Avro maps have string keys, not {key}"
        return ("dict", python_shape(value, classes))
    if hint in _PY_PRIMITIVES:
        return _PY_PRIMITIVES[hint]
    if dataclasses.is_dataclass(hint) or is_typeddict(hint):
        classes[hint.__name__] = hint
        return ("record", hint.__name__)
    raise AssertionError(f"no Avro counterpart for {hint!r}")


def _fields(cls: type) -> dict[str, Any]:
    """Field name -> type hint, of a dataclass (its fields, not ClassVars) or a TypedDict."""
    hints = get_type_hints(cls)
    if is_typeddict(cls):
        return hints
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _defaults(cls: type) -> dict[str, Any]:
    if is_typeddict(cls):
        return {}
    return {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            for f in dataclasses.fields(cls)
            if f.name not in _HEADER and (f.default is not dataclasses.MISSING
                                          or f.default_factory is not dataclasses.MISSING)}


def differences(schema: dict[str, Any], cls: type) -> list[str]:
    """Every way `cls` and the record `schema` differ, their nested records included."""
    found: list[str] = []
    pending = [(schema, cls)]
    seen: set[str] = set()
    named: dict[str, dict[str, Any]] = {}
    classes: dict[str, type] = {}
    while pending:
        record, klass = pending.pop()
        name = record["name"]
        if name in seen:
            continue
        seen.add(name)
        if klass.__name__ != name:
            found.append(f"record {name} is typed by a class named {klass.__name__}")
        avro = {f["name"]: f for f in record["fields"]}
        python = _fields(klass)
        found += [f"{name}.{f}: in the schema, not in {klass.__name__}" for f in avro if f not in python]
        found += [f"{name}.{f}: in {klass.__name__}, not in the schema" for f in python if f not in avro]
        defaults = _defaults(klass)
        for field in avro.keys() & python.keys():
            expected, actual = avro_shape(avro[field]["type"], named), python_shape(python[field], classes)
            if expected != actual:
                found.append(f"{name}.{field}: {expected} in the schema, {actual} in {klass.__name__}")
            if not is_typeddict(klass) and field not in _HEADER and \
                    ("default" in avro[field], avro[field].get("default")) != (field in defaults, defaults.get(field)):
                found.append(f"{name}.{field}: default {avro[field].get('default', 'none')!r} in the schema, "
                             f"{defaults.get(field, 'none')!r} in {klass.__name__}")
        pending += [(named[n], classes[n]) for n in named.keys() & classes.keys() if n not in seen]
    return found


@pytest.mark.parametrize("name", sorted(SCHEMAS.by_name))
def test_the_class_of_each_event_kind_has_the_fields_and_types_of_its_schema(name: str) -> None:
    assert differences(SCHEMAS[name].schema, KINDS[name].event) == []


@pytest.mark.parametrize("name", sorted(SCHEMAS.by_name))
def test_a_record_read_into_its_class_and_written_back_encodes_to_the_same_bytes(name: str) -> None:
    codec = AvroCodec()
    record = codec.decode(codec.encode(name, sample(SCHEMAS[name].schema))).record
    event = KINDS[name].event.from_record(record)
    assert event == KINDS[name].event.from_record(event.to_record())
    assert codec.encode(name, event.to_record()) == codec.encode(name, record)


def test_every_kind_has_a_schema_and_a_class_of_its_name() -> None:
    assert set(KINDS) == set(SCHEMAS.by_name)
    assert all(spec.event.__name__ == kind for kind, spec in KINDS.items())


def test_a_field_the_schema_lacks_or_a_type_it_does_not_have_is_named() -> None:
    """The check itself: a class with one field more, and one with a field of another type, both fail by name."""
    base = KINDS["AttemptHeartbeat"].event

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class AttemptHeartbeat(base):  # type: ignore[valid-type,misc]
        surprise: int

    assert differences(SCHEMAS["AttemptHeartbeat"].schema, AttemptHeartbeat) == [
        "AttemptHeartbeat.surprise: in AttemptHeartbeat, not in the schema"]
    schema = {**SCHEMAS["AttemptHeartbeat"].schema}
    schema["fields"] = [{**f, "type": "long"} if f["name"] == "heartbeat_time" else f for f in schema["fields"]]
    schema["fields"].append({"name": "added", "type": "string"})
    assert sorted(differences(schema, base)) == [
        "AttemptHeartbeat.added: in the schema, not in AttemptHeartbeat",
        "AttemptHeartbeat.heartbeat_time: int in the schema, float in AttemptHeartbeat"]


class _Inner(typing.TypedDict):
    a: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Outer:
    inner: _Inner | None = None


def test_nested_records_are_checked_whatever_their_class() -> None:
    inner = {"type": "record", "name": "_Inner",
             "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "int"}]}
    schema = {"type": "record", "name": "_Outer",
              "fields": [{"name": "inner", "type": ["null", inner], "default": None}]}
    assert differences(schema, _Outer) == ["_Inner.b: in the schema, not in _Inner"]

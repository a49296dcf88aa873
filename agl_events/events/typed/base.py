"""The bases of typed events: a record of the contract as a frozen dataclass, and the header every decision has.

Conversion is shallow and driven by the dataclass fields: `to_record()` is the dict the codec encodes (a
nested dataclass becomes its own record), `from_record()` builds the event from a decoded dict. Values that
are not dataclasses (strings, numbers, lists, a span and the other TypedDicts) pass through as they are,
so decoding and folding an event copies nothing it does not have to.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from functools import cache
from operator import attrgetter
from types import UnionType
from typing import Any, Self, get_args, get_type_hints


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """An Avro record of the contract (`schemas/`); the class is named as the record is."""

    def to_record(self) -> dict[str, Any]:
        plan = _plan(type(self))
        record = dict(zip(plan.names, plan.values(self), strict=True))
        for name in plan.nested:
            value = record[name]
            if value is not None:
                record[name] = value.to_record()
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        """From a decoded record. The codec has checked it against the schema (and resolved a record of an older
        writer schema into the current one, defaults included), so fields are set as they come, without
        `__init__`: a frozen dataclass's `__init__` sets each field through `object.__setattr__`, which on the
        fold's hot path cost as much as the rest of folding a span. A missing field raises KeyError."""
        plan = _plan(cls)
        made = _new(cls)
        for name, set_field, kind in plan.setters:
            value = record[name]
            set_field(made, value if kind is None or value is None else kind.from_record(value))
        return made


_new = object.__new__


@dataclass(frozen=True)
class _Plan:
    """What `Record` needs of a class, worked out once: its field names, which fields are records, and how to
    set each field of a new instance (the slot's own setter)."""

    names: tuple[str, ...]
    values: attrgetter[Any]
    nested: dict[str, type[Record]]
    setters: tuple[tuple[str, Callable[[Any, Any], None], type[Record] | None], ...]


@cache
def _plan(cls: type[Record]) -> _Plan:
    names = tuple(f.name for f in fields(cls))
    hints = get_type_hints(cls)
    nested = {name: kind for name in names if (kind := _record_type(hints[name])) is not None}
    slots = {name: member for klass in cls.__mro__ for name, member in vars(klass).items() if name in names}
    setters = tuple((name, slots[name].__set__, nested.get(name)) for name in names)
    return _Plan(names, attrgetter(*names), nested, setters)  # every record has several fields: a tuple of values


def _record_type(hint: Any) -> type[Record] | None:
    """The Record class a field holds (`Span`, or `Attempt | None`), or None for any other value."""
    candidates = get_args(hint) if isinstance(hint, UnionType) else (hint,)
    found = [c for c in candidates if isinstance(c, type) and issubclass(c, Record)]
    return found[0] if found else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Event(Record):
    """An event kind: the class name is the kind (`Kind`) and the schema's name."""

    @property
    def kind(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided(Event, ABC):
    """An event some process decided: the header every such schema carries, and the key it is appended under.

    Deciders build the event without a header; `stamp` gives it one when it is appended (the store's context
    on the store's clock, the tracer on the wall clock). The key is a property of the kind: everything about a
    rollout is keyed by its id, so it lands in one partition per topic (`agl_events.topics`).
    """

    event_id: str = ""
    time: float = 0.0
    producer_id: str = ""

    @property
    @abstractmethod
    def key(self) -> str:
        """The record key: which partition of the kind's topic the event goes to."""

    def stamp(self, time: float, producer_id: str) -> Self:
        """This event as decided at `time` by `producer_id`, with an id of its own (replays skip ids applied)."""
        return replace(self, event_id=uuid.uuid4().hex, time=time, producer_id=producer_id)

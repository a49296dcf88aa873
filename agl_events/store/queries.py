"""Filtering, sorting and pagination with upstream's semantics, over records read from the view."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, get_args, get_origin

from pydantic import BaseModel

Condition = Callable[[dict[str, Any]], bool]
Key = Callable[[dict[str, Any]], Any]


def exact(field: str, value: Any) -> Condition:
    return lambda item: item.get(field) == value


def within(field: str, values: Sequence[Any]) -> Condition:
    allowed = set(values)
    return lambda item: item.get(field) in allowed


def contains(field: str, needle: str) -> Condition:
    def check(item: dict[str, Any]) -> bool:
        value = item.get(field)
        return needle in value if isinstance(value, (str, list, tuple)) else False

    return check


def conditions(*, equal: dict[str, Any] | None = None, among: dict[str, Sequence[Any] | None] | None = None,
               containing: dict[str, str | None] | None = None) -> list[Condition]:
    """Conditions for the filters that were given, by field (a None value means "not filtering on it")."""
    found = [exact(f, v) for f, v in (equal or {}).items() if v is not None]
    found += [within(f, v) for f, v in (among or {}).items() if v is not None]
    found += [contains(f, v) for f, v in (containing or {}).items() if v is not None]
    return found


def matches(conditions: Sequence[Condition], logic: str) -> Condition:
    """All conditions pooled and combined by `logic`; no conditions matches everything."""
    if logic not in ("and", "or"):
        raise ValueError(f"Invalid filter logic: {logic}")
    if not conditions:
        return lambda item: True
    if logic == "and":
        return lambda item: all(c(item) for c in conditions)
    return lambda item: any(c(item) for c in conditions)


def _none_default(model: type[BaseModel], field: str) -> Any:
    """How upstream orders None: times last, strings as '', ints 0, floats 0.0."""
    if field.endswith("_time"):
        return math.inf
    annotation = model.model_fields[field].annotation
    args = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
    base = args[0]
    if get_origin(base) is not None and str(get_origin(base)) == "typing.Literal":
        return ""
    if base is str:
        return ""
    if base is int:
        return 0
    if base is float:
        return 0.0
    return ""


def sort_items(items: list[dict[str, Any]], model: type[BaseModel], sort_by: str | None, order: str
               ) -> list[dict[str, Any]]:
    if order not in ("asc", "desc"):
        raise ValueError(f"Invalid sort order: {order}")
    if sort_by is None:
        return items
    if sort_by not in model.model_fields:
        raise ValueError(f"Failed to sort items by {sort_by}: field does not exist on {model.__name__}")
    default = _none_default(model, sort_by)
    return sorted(items, key=lambda item: default if item.get(sort_by) is None else item[sort_by],
                  reverse=order == "desc")


def paginate(items: list[dict[str, Any]], limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The page and the total before paging. limit -1 means all; 0 means none."""
    total = len(items)
    if offset < 0:
        raise ValueError("offset must be non-negative")
    if limit == -1:
        return items[offset:], total
    if limit < 0:
        raise ValueError("limit must be -1 or non-negative")
    return items[offset: offset + limit], total


def select(items: Iterable[dict[str, Any]], model: type[BaseModel], conditions: Sequence[Condition],
           logic: str, must: Sequence[Condition], sort_by: str | None, order: str, limit: int, offset: int
           ) -> tuple[list[dict[str, Any]], int]:
    """Filter (must AND pooled conditions), sort, then paginate."""
    pooled = matches(conditions, logic)
    chosen = [item for item in items if all(m(item) for m in must) and pooled(item)]
    return paginate(sort_items(chosen, model, sort_by, order), limit, offset)


def merge(parts: Iterable[list[dict[str, Any]]], model: type[BaseModel], base: Key,
          sort_by: str | None, order: str, limit: int, offset: int) -> list[dict[str, Any]]:
    """One page from the pages of disjoint parts (a store group's members), as one store holding them all
    would cut it: each part sorted and paged from 0 to offset+limit (`part_window`), ordered by `base` (the
    order one store's candidates come in before the stable sort), sorted again, then cut."""
    pooled = sorted((item for part in parts for item in part), key=base)
    return paginate(sort_items(pooled, model, sort_by, order), limit, offset)[0]


def part_window(limit: int, offset: int) -> tuple[int, int]:
    """(limit, offset) a part of a fanned-out query answers with: everything that may land in the page."""
    return (-1 if limit == -1 else offset + limit), 0

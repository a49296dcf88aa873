"""Turning store results into the exact JSON upstream's server sends, and the pagination checks it makes first.

Upstream declares a `response_model` on every route, so FastAPI re-validates each result against it: an
`AttemptedRollout` returned where a `Rollout` is declared loses its `attempt` key, and missing objects are `null`.
We reproduce that by validating through a `TypeAdapter` of the declared type, then dumping it as JSON ourselves
(returning a `Response` also skips FastAPI's second, slower serialization pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, TypeAdapter, ValidationError

from agl_events.server.requests import PaginatedQuery
from agl_events.types import AttemptedRollout, PaginatedResult, Rollout

#: What query_rollouts and get_rollout_by_id return; the union keeps `attempt` only where there is one.
RolloutOrAttempted = AttemptedRollout | Rollout


class ResponseShapeError(RuntimeError):
    """The store returned something that does not fit the declared response type: a server bug, so a 500.

    Raised instead of pydantic's ValidationError, which is a ValueError and would otherwise become a 400.
    """


@cache
def _adapter(shape: Any) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


def to_json(value: Any, shape: Any) -> Any:
    """Validate `value` as `shape` (a type) and dump it to JSON-ready Python, as a `response_model` would."""
    adapter = _adapter(shape)
    try:
        return adapter.dump_python(adapter.validate_python(value), mode="json")
    except ValidationError as exc:
        raise ResponseShapeError(f"store result does not fit {shape!r}: {exc}") from exc


def respond(value: Any, shape: Any, status_code: int = 200) -> JSONResponse:
    """A JSON response of `value` shaped as `shape`; None becomes a literal `null` body, as upstream."""
    return JSONResponse(to_json(value, shape), status_code=status_code)


def respond_page(result: Sequence[Any], item_shape: Any, *, limit: int, offset: int) -> JSONResponse:
    """A `PaginatedResult` body. Items are shaped one by one so subclasses (AttemptedRollout) keep their fields.

    A backend that returns a plain list still gets a well-formed page, with `total` = its length (as upstream).
    """
    if isinstance(result, PaginatedResult):
        items, limit, offset, total = list(result.items), result.limit, result.offset, result.total
    else:
        items, total = list(result), len(result)
    body = {"items": to_json(items, list[item_shape]), "limit": limit, "offset": offset, "total": total}
    return JSONResponse(body)


def validate_pagination(request: PaginatedQuery, target: type[BaseModel]) -> None:
    """Reject bad paging or sorting before touching the store; every message names the allowed values."""
    if request.sort_by is not None and request.sort_by not in target.model_fields:
        allowed = ", ".join(target.model_fields)
        raise HTTPException(400, f"Invalid sort_by: {request.sort_by}, allowed fields are: {allowed}")
    if request.sort_order not in ("asc", "desc"):
        raise HTTPException(400, f"Invalid sort_order: {request.sort_order}, allowed values are: asc, desc")
    if request.limit == 0 or request.limit < -1:
        raise HTTPException(400, "Limit must be greater than 0 or -1 for no limit")
    if request.offset < 0:
        raise HTTPException(400, "Offset must be greater than or equal to 0")
    filter_logic = getattr(request, "filter_logic", "and")
    if filter_logic not in ("and", "or"):
        raise HTTPException(400, f"Invalid filter_logic: {filter_logic}, allowed values are: and, or")

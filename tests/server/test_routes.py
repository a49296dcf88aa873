"""The store routes' order: the hot ones first, and no route shadowed by one tried before it."""

from __future__ import annotations

import re

from fastapi.routing import APIRoute
from starlette.routing import Match

from agl_events.server.routes import create_agl_router, fixed_store
from agl_events.store import route_table
from agl_events.store.memory import InMemoryLightningStore


def _example(path: str) -> str:
    """A path the template matches, each parameter a value no literal segment has."""
    return re.sub(r"\{[^}]+\}", "p-1", path)


def test_every_route_is_the_first_to_match_a_path_of_its_own_template() -> None:
    router = create_agl_router(fixed_store(InMemoryLightningStore()))
    api = [route for route in router.routes if isinstance(route, APIRoute)]
    for route in api:
        [method] = route.methods
        scope = {"type": "http", "method": method, "path": _example(route.path), "root_path": ""}
        first = next(r for r in api if r.matches(scope)[0] == Match.FULL)
        assert first is route, f"{method} {route.path} is shadowed by {first.path}"


def test_the_routes_called_per_span_or_rollout_are_tried_first() -> None:
    router = create_agl_router(fixed_store(InMemoryLightningStore()))
    tried = [(next(iter(r.methods)), r.path.removeprefix("/v1/agl")) for r in router.routes if isinstance(r, APIRoute)]
    hot = {(r.method, r.path) for r in (route_table.NEXT_SEQUENCE_ID, route_table.CLAIMS, route_table.FINISH_ATTEMPTS,
                                        route_table.ADD_SPAN, route_table.DEQUEUE)}
    assert hot <= set(tried[:len(hot) + 2]), tried[:10]

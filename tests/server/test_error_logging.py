"""A forwarded command for a rollout this store no longer owns is refused with 421, and the forwarder routes it
again: part of a store group's hand-over, not a fault. The 3-store chaos run's store-0 log held 36 tracebacks
"Unhandled error on POST .../attempts/finish" for such refusals; they are logged as refusals (one line, no
traceback), as 400s and 503s are."""

from __future__ import annotations

import logging

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agl_events.server.errors import StoreErrorMiddleware
from agl_events.store.errors import NotOwnerError


async def _finish(request: Request) -> Response:
    raise NotOwnerError("rollout ro-1 is not owned by http://127.0.0.1:1")


async def test_a_refused_forward_is_a_421_logged_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    app = Starlette(routes=[Route("/v1/agl/attempts/finish", _finish, methods=["POST"])],
                    middleware=[Middleware(StoreErrorMiddleware)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://store") as client:
        with caplog.at_level(logging.INFO, logger="agl_events.server"):
            response = await client.post("/v1/agl/attempts/finish")
    assert response.status_code == 421 and response.json()["error_type"] == "NotOwnerError"
    logged = [r for r in caplog.records if r.name == "agl_events.server"]
    assert [(r.levelno, r.exc_info) for r in logged] == [(logging.INFO, None)]
    assert "ro-1 is not owned" in logged[0].getMessage()

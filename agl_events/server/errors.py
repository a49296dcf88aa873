"""How exceptions escaping a route become HTTP responses.

Policy (deliberately different from upstream, which answers 500 to everything): a store `ValueError` (unknown
rollout or attempt, "Item ... does not exist") or `TypeError` (bad input such as null heartbeat stats) is the
caller's fault, so it is a 400 with the message, which the upstream client raises at once without retrying;
input too large for the log (`EventTooLargeError`, a ValueError) is a 413 with its size and the limit. A write
asked of a read-only store (a view of the past, `ReadOnlyStoreError`) is a 405 with the reason. A store
that stopped serving (its view no longer follows the log), whose view cannot be opened (`ViewUnavailableError`:
the folder, and why), or whose store group could not reach a rollout's owner in time answers 503 with the
reason. Anything else is a server fault: a 500, which the client retries after probing /health. Tracebacks stay in
the server log and never go on the wire.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agl_events.log.encoding import EventTooLargeError
from agl_events.store.errors import NoOwnerError, NotOwnerError, ReadOnlyStoreError, StoreUnhealthyError
from agl_events.store.peers import PeerUnavailableError
from agl_events.views.rocks import ViewUnavailableError

logger = logging.getLogger("agl_events.server")

#: Exception types whose message is the caller's to read: answered 400 instead of 500.
CLIENT_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError)
#: The store cannot serve at all (or its view cannot be opened): 503 with the reason.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (StoreUnhealthyError, NoOwnerError, ViewUnavailableError,
                                                   PeerUnavailableError)


class ErrorBody(BaseModel):
    """The JSON body of every error but FastAPI's 422 (whose `detail` lists the invalid fields): the reason,
    and the exception's class name where an exception gave it (HTTPExceptions send `detail` only)."""

    detail: str
    error_type: str | None = None


#: The error statuses any store route may answer, for the OpenAPI document (`responses=` of a router).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Bad input: an unknown rollout or attempt, a bad filter or page"},
    404: {"model": ErrorBody, "description": "No such experiment (an illegal name)"},
    405: {"model": ErrorBody, "description": "A write asked of a read-only store (a view of the past)"},
    413: {"model": ErrorBody, "description": "Input too large for one event on the log"},
    421: {"model": ErrorBody, "description": "A command another store forwarded here for a rollout this store does "
                                             "not own (any more): the forwarder asks the owner"},
    500: {"model": ErrorBody, "description": "A server fault (the client retries it after probing /health)"},
    503: {"model": ErrorBody, "description": "The store stopped serving (its view no longer follows the log), "
                                             "or its view cannot be opened, or no store of its group could decide "
                                             "in time"},
}


def error_response(exc: Exception) -> JSONResponse:
    """The JSON error body for `exc`: `detail` and `error_type` (the exception's class name)."""
    error_type = type(exc).__name__
    if isinstance(exc, ReadOnlyStoreError):
        return JSONResponse({"detail": str(exc), "error_type": error_type}, status_code=405)
    if isinstance(exc, NotOwnerError):
        return JSONResponse({"detail": str(exc), "error_type": error_type}, status_code=421)
    if isinstance(exc, CLIENT_ERRORS):
        status = 413 if isinstance(exc, EventTooLargeError) else 400
        return JSONResponse({"detail": str(exc) or error_type, "error_type": error_type}, status_code=status)
    if isinstance(exc, UNAVAILABLE_ERRORS):
        return JSONResponse({"detail": str(exc), "error_type": error_type}, status_code=503)
    return JSONResponse({"detail": "Internal server error", "error_type": error_type}, status_code=500)


class StoreErrorMiddleware:
    """Pure ASGI middleware turning unhandled exceptions into `error_response`s.

    It sits inside the metrics middleware so the counted status is the one the client sees. It is pure ASGI
    (not `BaseHTTPMiddleware`) so it adds no task or body buffering per request. If the response has
    already started there is nothing left to replace, so the exception propagates to the server.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception as exc:
            if started:
                raise
            path = scope.get("path", "?")
            # expected answers (a 421 included: the forwarder routes it again), logged without a traceback
            if isinstance(exc, (*CLIENT_ERRORS, *UNAVAILABLE_ERRORS, ReadOnlyStoreError, NotOwnerError)):
                logger.info("%s %s rejected: %s: %s", scope.get("method"), path, type(exc).__name__, exc)
            else:
                logger.exception("Unhandled error on %s %s", scope.get("method"), path)
            await error_response(exc)(scope, receive, send)

"""The request body limit: a 413 before a large body is read into memory, not after.

Routes read their whole body (JSON models, OTLP protobuf) before any check of their own, so without a limit
here a 1 GB body would be held in memory first. A declared `Content-Length` over the limit is refused before
a byte is read; a body streamed without one (chunked) is cut off as soon as it passes the limit, and the 413
replaces whatever the route made of the cut body. uvicorn reads bodies with flow control, so what is held per
connection stays near the limit. The limit leaves room for several of the largest records (a span is refused
on its own at `EVENT_MAX_BYTES`, with its size, by the store: see `server.errors`).
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agl_events.topics import MESSAGE_MAX_BYTES

#: Bytes; a request body larger than this is a 413.
MAX_BODY_BYTES = 4 * MESSAGE_MAX_BYTES


class RequestBodyTooLarge(Exception):
    """Raised from `receive` once a streamed body passes the limit, to stop the route reading it."""


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # uvicorn refuses a malformed Content-Length before the app sees it
    return None


def too_large(max_bytes: int, declared: int | None) -> JSONResponse:
    """The 413 body, in the shape of every other error (`server.errors.ErrorBody`)."""
    size = f"{declared} bytes" if declared is not None else "a streamed body"
    return JSONResponse({"detail": f"request body too large: {size}; the limit is {max_bytes} bytes",
                         "error_type": RequestBodyTooLarge.__name__}, status_code=413)


class BodyLimitMiddleware:
    """Pure ASGI middleware refusing request bodies over `max_bytes` with a 413."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await too_large(self.max_bytes, declared)(scope, receive, send)
            return
        received = 0
        cut_off = False

        async def limited_receive() -> Message:
            nonlocal received, cut_off
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    cut_off = True
                    raise RequestBodyTooLarge(f"request body passed {self.max_bytes} bytes")
            return message

        async def send_unless_cut_off(message: Message) -> None:
            if not cut_off:  # the route answered a body it could not read whole: the 413 goes instead
                await send(message)

        try:
            await self.app(scope, limited_receive, send_unless_cut_off)
        except Exception:
            if not cut_off:
                raise
        if cut_off:
            await too_large(self.max_bytes, None)(scope, receive, send)

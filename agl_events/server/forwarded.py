"""Marks requests another store of the group forwarded here (`store.peers`), so this store decides them or
refuses them (421), and never forwards them on."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from agl_events.store.peers import FORWARDED, FORWARDED_HEADER

_HEADER = FORWARDED_HEADER.lower().encode()


class ForwardedMiddleware:
    """Pure ASGI: sets `FORWARDED` for the request's task while it is served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not any(name == _HEADER for name, _ in scope.get("headers", ())):
            await self.app(scope, receive, send)
            return
        token = FORWARDED.set(True)
        try:
            await self.app(scope, receive, send)
        finally:
            FORWARDED.reset(token)

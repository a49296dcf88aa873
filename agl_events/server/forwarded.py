"""Marks requests another store of the group forwarded here (`store.peers`), so this store decides them or
refuses them (421), and never forwards them on; a fanned-out query also names the partitions it answers for."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from agl_events.store.peers import ASKED_PARTITIONS, FORWARDED, FORWARDED_HEADER, PARTITIONS_HEADER

_HEADER = FORWARDED_HEADER.lower().encode()
_PARTITIONS = PARTITIONS_HEADER.lower().encode()


class ForwardedMiddleware:
    """Pure ASGI: sets `FORWARDED` (and `ASKED_PARTITIONS`) for the request's task while it is served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not any(name == _HEADER for name, _ in scope.get("headers", ())):
            await self.app(scope, receive, send)
            return
        asked = next((value for name, value in scope["headers"] if name == _PARTITIONS), None)
        token = FORWARDED.set(True)
        partitions = ASKED_PARTITIONS.set(
            None if asked is None else frozenset(int(p) for p in asked.decode().split(",") if p))
        try:
            await self.app(scope, receive, send)
        finally:
            ASKED_PARTITIONS.reset(partitions)
            FORWARDED.reset(token)

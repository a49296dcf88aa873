"""Asking the store that owns a rollout's partition to decide a command (`store.ownership`), over its REST API.

A forwarded request carries `FORWARDED_HEADER`, so its receiver decides or refuses (421, `NotOwnerError`) and
never forwards again: ownership that moved while a request was on its way costs a retry, never a loop. Errors
come back as the exceptions the owner raised (an unknown rollout is still a ValueError, a 400 to the caller).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

import httpx
from pydantic_core import to_jsonable_python

from agl_events.store.errors import NoOwnerError, NotOwnerError

FORWARDED_HEADER = "X-AGL-Forwarded"
#: True while a request another store forwarded is being served (set by the server from FORWARDED_HEADER).
FORWARDED: ContextVar[bool] = ContextVar("agl_forwarded", default=False)
#: A query over all rollouts that one store fans out to the group names, to each member, the partitions it is
#: to answer for (comma-separated): the member answers for exactly those, or refuses (421) if it no longer owns
#: them all, so that a partition moving while the query is on its way is answered once, never twice or not at all.
PARTITIONS_HEADER = "X-AGL-Partitions"
#: The partitions asked for (set by the server from PARTITIONS_HEADER); None outside a fanned-out query.
ASKED_PARTITIONS: ContextVar[frozenset[int] | None] = ContextVar("agl_asked_partitions", default=None)
#: A forwarded command waits for its owner like any caller waits for a commit (acks=all), plus the fold.
PEER_TIMEOUT_SECONDS = 60.0


class PeerUnavailableError(RuntimeError):
    """The owner could not be reached or failed: it may be gone, and the group will hand its partitions on."""


class PeerStores:
    """One HTTP client for every other store of the group, on experiment `experiment`'s routes."""

    def __init__(self, experiment: str, auth_token: str | None = None,
                 timeout: float = PEER_TIMEOUT_SECONDS) -> None:
        headers = {FORWARDED_HEADER: "1"}
        if auth_token:
            headers["Authorization"] = f"Bearer {auth_token}"
        self._prefix = f"/experiments/{experiment}/v1/agl"
        self._http = httpx.AsyncClient(timeout=timeout, headers=headers)
        self._calls: set[asyncio.Task[httpx.Response]] = set()
        self._stopped = False

    def stop(self) -> None:
        """This store is shutting down: calls on their way to an owner (which may never answer) and later ones
        fail now with NoOwnerError (a 503 to retry elsewhere), so that the server need not wait them out."""
        self._stopped = True
        for call in self._calls:
            call.cancel()

    async def call(self, owner: str, method: str, path: str, body: Any = None, *,
                   partitions: Iterable[int] | None = None) -> Any:
        """`method path` at `owner` (a store's base URL), for a fanned-out query with the `partitions` it
        answers for; the JSON answer, or the owner's error raised here."""
        if self._stopped:
            raise NoOwnerError("this store is shutting down; ask another store of the group")
        headers = {} if partitions is None else {PARTITIONS_HEADER: ",".join(map(str, sorted(partitions)))}
        request = asyncio.ensure_future(self._http.request(
            method, f"{owner.rstrip('/')}{self._prefix}{path}", headers=headers,
            json=to_jsonable_python(body) if body is not None else None))
        self._calls.add(request)
        try:
            response = await request
        except httpx.HTTPError as exc:
            raise PeerUnavailableError(f"store {owner} unreachable: {type(exc).__name__}: {exc}") from exc
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if self._stopped and not (caller is not None and caller.cancelling()):
                raise NoOwnerError(f"this store is shutting down (store {owner} had not answered)") from None
            raise
        finally:
            self._calls.discard(request)
        if response.status_code < 300:
            return response.json()
        detail, error_type = _error_of(response)
        if response.status_code == 421:
            raise NotOwnerError(detail)
        if response.status_code in (400, 413):
            raise (TypeError if error_type == "TypeError" else ValueError)(detail)
        raise PeerUnavailableError(f"store {owner} answered {response.status_code}: {detail}")

    async def close(self) -> None:
        await self._http.aclose()


def _error_of(response: httpx.Response) -> tuple[str, str | None]:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500], None
    if isinstance(body, dict):
        return str(body.get("detail", body)), body.get("error_type")
    return str(body), None


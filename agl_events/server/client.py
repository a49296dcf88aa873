"""A small async client of the agl-events store server, for our runners and CLI.

Agent Lightning's own `LightningStoreClient` works against the server too; this one adds the runner
extensions (`claim`, `finish_attempt` and their batched forms), turns connection failures into one clear
error, and pulls in no agentlightning.

Its calls go through aiohttp with orjson: a runner's claims, finishes and heartbeats cost about 210 µs of
client CPU each, against about 950 µs through httpx's AsyncClient (the same small JSON call to a uvicorn
server, measured alone), which was most of a runner's event-loop time on `bench --preset medium`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp
import httpx
import orjson
from yarl import URL

from agl_events.store import route_table as routes
from agl_events.topics import partition_of
from agl_events.types import (
    Attempt,
    AttemptFinish,
    Claim,
    EnqueueRolloutRequest,
    FinishOutcome,
    PromptCandidate,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)

#: How often a client reads the store group's map of owners again.
OWNERS_SECONDS = 5.0
_JSON_BODY = {"Content-Type": "application/json"}


def experiment_url(store_url: str, experiment: str) -> str:
    """The store server serves every experiment under /experiments/<name> (the default one at the root too)."""
    return f"{store_url.rstrip('/')}/experiments/{experiment}"


def url_with_token(store_url: str, token: str, user: str = "agl") -> str:
    """`store_url` carrying `token` as its basic-auth password, which the server accepts like a bearer token.

    For Agent Lightning's `LightningStoreClient`, which cannot set headers: aiohttp sends a URL's credentials,
    so `LightningStoreClient(url_with_token("http://host:4747/experiments/exp1", token))` works unchanged,
    and so does its OTLP exporter (requests does the same). Mind that it logs its URL on retries.
    """
    parts = urlsplit(store_url)
    netloc = f"{quote(user, safe='')}:{quote(token, safe='')}@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit(parts._replace(netloc=netloc))


class StoreUnavailableError(RuntimeError):
    """The store server cannot be reached or answered with a server error."""


class StoreAuthError(StoreUnavailableError):
    """The store server asks for a bearer token this client did not send, or refused the one it sent."""


class StoreClient:
    """Runner calls about rollouts (claims, finishes) go straight to the store owning each rollout's partition
    when the stores form a store group (its map read from `/statistics` every OWNERS_SECONDS), saving the store
    at `base_url` a forward; any store would forward them too, and calls fall back to it when an owner is not
    reachable."""

    def __init__(self, base_url: str, timeout: float = 30.0, auth_token: str | None = None) -> None:
        """`auth_token`: the bearer token the server asks for (`agl-events store --auth-token`), if any."""
        self.base_url = base_url.rstrip("/")
        self._experiment_path = urlsplit(self.base_url).path  # "" or /experiments/<name>, the same on every store
        self._owners: tuple[int, dict[int, str]] | None = None
        self._owners_read = -OWNERS_SECONDS
        self._timeout = timeout
        self._headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
        self._session: aiohttp.ClientSession | None = None  # made on first use, in the loop that uses it
        self._blocking: httpx.Client | None = None  # only for `sequence_reserver`, made on first use
        self._blocking_lock = threading.Lock()

    def _http(self) -> aiohttp.ClientSession:
        """The session, made on first use: aiohttp binds it to the running loop, and some clients are built
        before any loop runs."""
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._headers,
                                                  timeout=aiohttp.ClientTimeout(total=self._timeout))
        return self._session

    async def _call(self, method: str, path: str, at: str | None = None, *, json: Any = None,
                    params: dict[str, str] | None = None) -> Any:
        """`method path` at the store `base_url`, or at the store whose root URL is `at`."""
        root = self.base_url if at is None else f"{at.rstrip('/')}{self._experiment_path}"
        url = f"{root}/v1/agl{path}"  # its parameters already quoted (`Route.url`): sent as they are
        body = None if json is None else orjson.dumps(json, option=orjson.OPT_NON_STR_KEYS)
        try:
            async with self._http().request(method, URL(url, encoded=True), data=body, params=params,
                                            headers=None if body is None else _JSON_BODY) as response:
                status, content = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._unreachable(exc) from exc
        return _checked(status, content, method, path)

    def _route(self, route: routes.Route, at: str | None = None, *, json: Any = None,
               params: dict[str, str] | None = None, **path: str) -> Awaitable[Any]:
        """`route` (its path filled with `path`) at the store `base_url`, or at the store whose root URL is `at`."""
        return self._call(route.method, route.url(**path), at, json=json, params=params)

    def _unreachable(self, exc: Exception) -> StoreUnavailableError:
        return StoreUnavailableError(f"cannot reach the store at {self.base_url} ({exc!r}); start it with "
                                     "`agl-events store` or set --store-url / AGL_STORE_URL")

    async def enqueue_many(self, requests: Sequence[EnqueueRolloutRequest]) -> list[Rollout]:
        body = {"rollouts": [r.model_dump(mode="json") for r in requests]}
        return [Rollout.model_validate(r) for r in await self._route(routes.ENQUEUE, json=body)]

    async def claim(self, rollout_id: str, worker_id: str) -> Claim | None:
        data = await self._route(routes.CLAIM, rollout_id=rollout_id, json={"worker_id": worker_id})
        return None if data["rollout"] is None else Claim.model_validate(data)

    async def claim_many(self, rollout_ids: Sequence[str], worker_id: str) -> list[Claim | None]:
        """Claim several dispatched tasks, one call per owning store; None for each no longer waiting."""
        async def claim(at: str | None, indices: list[int]) -> list[Any]:
            return await self._route(routes.CLAIMS, at, json={"worker_id": worker_id,
                                                               "rollout_ids": [rollout_ids[i] for i in indices]})

        data = await self._at_owners(rollout_ids, claim)
        return [None if c["rollout"] is None else Claim.model_validate(c) for c in data]

    async def _at_owners(self, rollout_ids: Sequence[str],
                         call: Callable[[str | None, list[int]], Awaitable[list[Any]]]) -> list[Any]:
        """`call(owner, indices)` for each owner's share of `rollout_ids` (None: `base_url`), concurrently; the
        answers in the order of `rollout_ids`. A share whose owner cannot be reached goes to `base_url`."""
        groups: dict[str | None, list[int]] = {}
        owners = await self._owner_map()
        for i, rid in enumerate(rollout_ids):
            groups.setdefault(owners[1].get(partition_of(rid, owners[0])) if owners else None, []).append(i)

        async def share(owner: str | None, indices: list[int]) -> list[Any]:
            try:
                return await call(owner, indices)
            except StoreUnavailableError:
                if owner is None:
                    raise
                self._owners_read = -OWNERS_SECONDS  # read the map again next time
                return await call(None, indices)

        answers = await asyncio.gather(*(share(owner, indices) for owner, indices in groups.items()))
        ordered: list[Any] = [None] * len(rollout_ids)
        for indices, answer in zip(groups.values(), answers, strict=True):
            for i, value in zip(indices, answer, strict=True):
                ordered[i] = value
        return ordered

    async def _owner_map(self) -> tuple[int, dict[int, str]] | None:
        """(partitions, partition -> owner's URL) of the store group, None for a store outside one."""
        now = time.monotonic()
        if now - self._owners_read >= OWNERS_SECONDS:
            self._owners_read = now
            group = (await self._route(routes.STATISTICS)).get("store_group")
            self._owners = None if group is None else (group["partitions"], {int(p): url for p, url in
                                                                              group["owners"].items()})
        return self._owners

    async def finish_attempt(self, rollout_id: str, attempt_id: str, status: str, spans_through: dict[int, int]
                             ) -> Attempt:
        """End an attempt whose spans went to the span topic up to `spans_through` (partition -> next offset)."""
        data = await self._route(routes.FINISH_ATTEMPT, rollout_id=rollout_id, attempt_id=attempt_id,
                                 json={"status": status, "spans_through": spans_through})
        return Attempt.model_validate(data)

    async def finish_many(self, finishes: Sequence[AttemptFinish]) -> list[FinishOutcome]:
        """End several attempts, one call per owning store; an outcome per attempt, in order."""
        async def finish(at: str | None, indices: list[int]) -> list[Any]:
            return await self._route(routes.FINISH_ATTEMPTS, at,
                                     json={"finishes": [finishes[i].model_dump(mode="json") for i in indices]})

        return [FinishOutcome.model_validate(o) for o in await self._at_owners([f.rollout_id for f in finishes],
                                                                               finish)]

    async def query_rollouts(self) -> list[Rollout]:
        """Every rollout (without its latest attempt: `query_attempts` has them all)."""
        data = await self._route(routes.QUERY_ROLLOUTS)
        return [Rollout.model_validate({k: v for k, v in r.items() if k != "attempt"}) for r in data["items"]]

    async def query_spans(self, rollout_id: str) -> list[Span]:
        """Every span of the rollout, of every attempt, by sequence id."""
        data = await self._route(routes.QUERY_SPANS, params={"rollout_id": rollout_id})
        return [Span.model_validate(s) for s in data["items"]]

    async def query_resources(self) -> list[ResourcesUpdate]:
        data = await self._route(routes.QUERY_RESOURCES)
        return [ResourcesUpdate.model_validate(r) for r in data["items"]]

    async def query_workers(self) -> list[Worker]:
        data = await self._route(routes.QUERY_WORKERS)
        return [Worker.model_validate(w) for w in data["items"]]

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        """Every attempt of the rollout (none for an unknown rollout), oldest first."""
        data = await self._route(routes.QUERY_ATTEMPTS, rollout_id=rollout_id)
        return [Attempt.model_validate(a) for a in data["items"]]

    async def next_span_sequence_id(self, rollout_id: str, attempt_id: str, *, check_attempt: bool = False) -> int:
        """Reserve the rollout's next span sequence id (upstream's `get_next_span_sequence_id`); with
        `check_attempt`, ValueError instead where the store has no such attempt."""
        body: dict[str, Any] = {"rollout_id": rollout_id, "attempt_id": attempt_id}
        if check_attempt:
            body["check_attempt"] = True
        data = await self._route(routes.NEXT_SEQUENCE_ID, json=body)
        return int(data["sequence_id"])

    def sequence_reserver(self, rollout_id: str, attempt_id: str) -> Callable[[int], int]:
        """`next_span_sequence_id` for one attempt as a blocking call, for the tracer: it numbers a span inside
        `span.end()`, on whichever thread ends it, where no event loop can be awaited. Each call reserves `count`
        consecutive ids (one unless asked for more) and returns the first."""
        def reserve(count: int = 1) -> int:
            body = {"rollout_id": rollout_id, "attempt_id": attempt_id, "count": count}
            try:
                response = self._blocking_http().post(routes.NEXT_SEQUENCE_ID.path, json=body)
            except httpx.TransportError as exc:
                raise self._unreachable(exc) from exc
            return int(_checked(response.status_code, response.content, "POST", routes.NEXT_SEQUENCE_ID.path
                                )["sequence_id"])

        return reserve

    def _blocking_http(self) -> httpx.Client:
        """The blocking client, made on the first reservation (from whichever thread makes it), not with the
        first reserver: a runner makes a reserver per attempt, but attempts that are not proxied rarely
        reserve, and a client costs 30-60 ms of CPU (its TLS context) in a runner's first rollout."""
        with self._blocking_lock:
            if self._blocking is None:
                self._blocking = httpx.Client(base_url=f"{self.base_url}/v1/agl", timeout=self._timeout,
                                              headers=self._headers)
            return self._blocking

    async def get_resources(self, resources_id: str | None) -> ResourcesUpdate | None:
        data = await (self._route(routes.GET_RESOURCES, resources_id=resources_id) if resources_id
                      else self._route(routes.LATEST_RESOURCES))
        return None if data is None else ResourcesUpdate.model_validate(data)

    async def task_request(self, key: str) -> Rollout | None:
        """The rollout the task request with idempotency key `key` became; None while it is not ingested."""
        data = await self._route(routes.TASK_REQUEST, key=key)
        return Rollout.model_validate(data["rollout"]) if data["rollout"] is not None else None

    async def prompt_candidates(self, run_id: str | None = None) -> list[PromptCandidate]:
        """The candidates of an APO run (every run's without `run_id`), in the order they were proposed."""
        data = await self._route(routes.PROMPT_CANDIDATES, params={} if run_id is None else {"run_id": run_id})
        return [PromptCandidate.model_validate(c) for c in data]

    async def update_worker(self, worker_id: str, heartbeat_stats: dict[str, Any]) -> Worker:
        data = await self._route(routes.UPDATE_WORKER, worker_id=worker_id, json={"heartbeat_stats": heartbeat_stats})
        return Worker.model_validate(data)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._blocking is not None:
            self._blocking.close()


def _checked(status: int, content: bytes, method: str, path: str) -> Any:
    """The JSON of a successful answer (`status`, body `content`); StoreUnavailableError for a server error
    (StoreAuthError for a missing or wrong token), ValueError for a refusal."""
    if status == 401:
        raise StoreAuthError(f"the store refused {method} {path} ({orjson.loads(content).get('detail', '401')}); "
                             "set the store's token with --auth-token / AGL_AUTH_TOKEN")
    if status >= 500:
        raise StoreUnavailableError(f"store error {status} on {path}: {content[:300].decode(errors='replace')}")
    if status >= 400:
        raise ValueError(f"store rejected {method} {path} ({status}): {content[:300].decode(errors='replace')}")
    return orjson.loads(content)

"""A small async client of the agl-events store server, for our runners and CLI.

Agent Lightning's own `LightningStoreClient` works against the server too; this one adds the runner
extensions (`claim`, `finish_attempt` and their batched forms), turns connection failures into one clear
error, and pulls in no agentlightning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

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

NEXT_SEQUENCE_ID = "/spans/next"


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
    def __init__(self, base_url: str, timeout: float = 30.0, auth_token: str | None = None) -> None:
        """`auth_token`: the bearer token the server asks for (`agl-events store --auth-token`), if any."""
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
        self._http = httpx.AsyncClient(base_url=f"{self.base_url}/v1/agl", timeout=timeout, headers=self._headers)
        self._blocking: httpx.Client | None = None  # only for `sequence_reserver`, made on first use

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        return _checked(response, method, path)

    def _unreachable(self, exc: Exception) -> StoreUnavailableError:
        return StoreUnavailableError(f"cannot reach the store at {self.base_url} ({exc!r}); start it with "
                                     "`agl-events store` or set --store-url / AGL_STORE_URL")

    async def enqueue_many(self, requests: Sequence[EnqueueRolloutRequest]) -> list[Rollout]:
        body = {"rollouts": [r.model_dump(mode="json") for r in requests]}
        return [Rollout.model_validate(r) for r in await self._call("POST", "/queues/rollouts/enqueue", json=body)]

    async def claim(self, rollout_id: str, worker_id: str) -> Claim | None:
        data = await self._call("POST", f"/rollouts/{rollout_id}/claim", json={"worker_id": worker_id})
        return None if data["rollout"] is None else Claim.model_validate(data)

    async def claim_many(self, rollout_ids: Sequence[str], worker_id: str) -> list[Claim | None]:
        """Claim several dispatched tasks in one call; None for each no longer waiting."""
        data = await self._call("POST", "/claims", json={"worker_id": worker_id, "rollout_ids": list(rollout_ids)})
        return [None if c["rollout"] is None else Claim.model_validate(c) for c in data]

    async def update_attempt(self, rollout_id: str, attempt_id: str, **fields: Any) -> Attempt:
        data = await self._call("POST", f"/rollouts/{rollout_id}/attempts/{attempt_id}", json=fields)
        return Attempt.model_validate(data)

    async def finish_attempt(self, rollout_id: str, attempt_id: str, status: str, spans_through: dict[int, int]
                             ) -> Attempt:
        """End an attempt whose spans went to the span topic up to `spans_through` (partition -> next offset)."""
        data = await self._call("POST", f"/rollouts/{rollout_id}/attempts/{attempt_id}/finish",
                                json={"status": status, "spans_through": spans_through})
        return Attempt.model_validate(data)

    async def finish_many(self, finishes: Sequence[AttemptFinish]) -> list[FinishOutcome]:
        """End several attempts in one call; an outcome per attempt, in order."""
        data = await self._call("POST", "/attempts/finish",
                                json={"finishes": [f.model_dump(mode="json") for f in finishes]})
        return [FinishOutcome.model_validate(o) for o in data]

    async def query_rollouts(self) -> list[Rollout]:
        """Every rollout (without its latest attempt: `query_attempts` has them all)."""
        data = await self._call("GET", "/rollouts")
        return [Rollout.model_validate({k: v for k, v in r.items() if k != "attempt"}) for r in data["items"]]

    async def query_spans(self, rollout_id: str) -> list[Span]:
        """Every span of the rollout, of every attempt, by sequence id."""
        data = await self._call("GET", "/spans", params={"rollout_id": rollout_id})
        return [Span.model_validate(s) for s in data["items"]]

    async def query_resources(self) -> list[ResourcesUpdate]:
        data = await self._call("GET", "/resources")
        return [ResourcesUpdate.model_validate(r) for r in data["items"]]

    async def query_workers(self) -> list[Worker]:
        data = await self._call("GET", "/workers")
        return [Worker.model_validate(w) for w in data["items"]]

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        """Every attempt of the rollout (none for an unknown rollout), oldest first."""
        data = await self._call("GET", f"/rollouts/{rollout_id}/attempts")
        return [Attempt.model_validate(a) for a in data["items"]]

    async def next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        """Reserve the rollout's next span sequence id (upstream's `get_next_span_sequence_id`)."""
        data = await self._call("POST", NEXT_SEQUENCE_ID, json={"rollout_id": rollout_id, "attempt_id": attempt_id})
        return int(data["sequence_id"])

    def sequence_reserver(self, rollout_id: str, attempt_id: str) -> Callable[[], int]:
        """`next_span_sequence_id` for one attempt as a blocking call, for the tracer: it numbers a span inside
        `span.end()`, on whichever thread ends it, where no event loop can be awaited."""
        if self._blocking is None:
            self._blocking = httpx.Client(base_url=f"{self.base_url}/v1/agl", timeout=self._timeout,
                                          headers=self._headers)
        http, body = self._blocking, {"rollout_id": rollout_id, "attempt_id": attempt_id}

        def reserve() -> int:
            try:
                response = http.post(NEXT_SEQUENCE_ID, json=body)
            except httpx.TransportError as exc:
                raise self._unreachable(exc) from exc
            return int(_checked(response, "POST", NEXT_SEQUENCE_ID)["sequence_id"])

        return reserve

    async def get_resources(self, resources_id: str | None) -> ResourcesUpdate | None:
        data = await self._call("GET", f"/resources/{resources_id}" if resources_id else "/resources/latest")
        return None if data is None else ResourcesUpdate.model_validate(data)

    async def task_request(self, key: str) -> Rollout | None:
        """The rollout the task request with idempotency key `key` became; None while it is not ingested."""
        data = await self._call("GET", f"/task-requests/{quote(key, safe='')}")
        return Rollout.model_validate(data["rollout"]) if data["rollout"] is not None else None

    async def prompt_candidates(self, run_id: str | None = None) -> list[PromptCandidate]:
        """The candidates of an APO run (every run's without `run_id`), in the order they were proposed."""
        data = await self._call("GET", "/prompt-candidates", params={} if run_id is None else {"run_id": run_id})
        return [PromptCandidate.model_validate(c) for c in data]

    async def update_worker(self, worker_id: str, heartbeat_stats: dict[str, Any]) -> Worker:
        data = await self._call("POST", f"/workers/{worker_id}", json={"heartbeat_stats": heartbeat_stats})
        return Worker.model_validate(data)

    async def close(self) -> None:
        await self._http.aclose()
        if self._blocking is not None:
            self._blocking.close()


def _checked(response: httpx.Response, method: str, path: str) -> Any:
    """The JSON of a successful answer; StoreUnavailableError for a server error (StoreAuthError for a missing
    or wrong token), ValueError for a refusal."""
    if response.status_code == 401:
        raise StoreAuthError(f"the store refused {method} {path} ({response.json().get('detail', '401')}); "
                             "set the store's token with --auth-token / AGL_AUTH_TOKEN")
    if response.status_code >= 500:
        raise StoreUnavailableError(f"store error {response.status_code} on {path}: {response.text[:300]}")
    if response.status_code >= 400:
        raise ValueError(f"store rejected {method} {path} ({response.status_code}): {response.text[:300]}")
    return response.json()

"""Bearer tokens on the store server: every route refuses a missing or wrong token (but /health), experiments
with their own token stay apart, and our client, upstream's `LightningStoreClient`, its OTLP exporter and
runner processes all get in with the right one."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from fastapi.routing import APIRoute
from pydantic import SecretStr
from starlette.routing import Route

from agl_events.config import Settings
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.auth import (
    AuthConfigError,
    AuthTokens,
    experiment_of,
    load_experiment_tokens,
    presented_token,
)
from agl_events.server.client import StoreAuthError, StoreClient, url_with_token
from agl_events.server.embedded import embedded_store_server
from agl_events.store.contract import LightningStore
from agl_events.store.memory import InMemoryLightningStore
from agl_events.types import EnqueueRolloutRequest
from tests.runner.agents import SPANS_PER_ROLLOUT, counting_agent
from tests.server.conftest import RunningServer

GLOBAL, TOKEN_1, TOKEN_2 = "global-secret", "exp1 secret/with:odd@chars", "exp2-secret"
TOKENS = AuthTokens(GLOBAL, {"exp1": TOKEN_1, "exp2": TOKEN_2})


async def _memory_store(experiment: str) -> LightningStore:
    return InMemoryLightningStore(scan_debounce_seconds=0)  # type: ignore[return-value]


@pytest.fixture
def secured() -> Iterator[RunningServer]:
    running = RunningServer(_memory_store, auth=TOKENS)
    running.start()
    yield running
    running.stop()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _routes(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, set[str]]]:
    """(path, methods) of every route, those of included routers too (FastAPI 0.165 keeps an included router
    as one entry holding the original router and its prefix)."""
    for route in routes:
        if hasattr(route, "original_router"):
            yield from _routes(route.original_router.routes, prefix + route.include_context.prefix)
        elif isinstance(route, APIRoute | Route) and route.methods:
            yield prefix + route.path, set(route.methods)


def _requests(app: Any, experiment: str) -> list[tuple[str, str]]:
    """(method, concrete path) for every route of the app, `{experiment}` filled in and other parameters made up."""
    found = []
    for template, methods in _routes(app.routes):
        path = re.sub(r"\{[^}]+\}", "x", template.replace("{experiment}", experiment))
        found.extend((method, path) for method in sorted(methods))
    return found


def test_every_route_but_health_refuses_a_missing_or_wrong_token_and_takes_the_right_one(
        secured: RunningServer) -> None:
    requests = _requests(secured.app, "exp1")
    paths = {path for _, path in requests}
    assert {"/v1/traces", "/experiments/exp1/v1/traces", "/metrics", "/health"} <= paths, paths
    assert len([p for p in paths if p.startswith("/experiments/exp1/")]) > 20
    with httpx.Client(base_url=secured.url, timeout=10) as http:
        for method, path in requests:
            right = TOKEN_1 if path.startswith("/experiments/exp1/") else GLOBAL  # root: default experiment
            wrong = [GLOBAL, TOKEN_2, right + "x"] if right == TOKEN_1 else [TOKEN_1, right[:-1]]
            body = {} if method in ("POST", "PUT", "PATCH") else None
            if path == "/health":
                assert http.request(method, path).status_code == 200
                continue
            missing = http.request(method, path, json=body)
            assert missing.status_code == 401, (method, path)
            assert missing.headers["www-authenticate"] == 'Bearer realm="agl-events"'
            if method != "HEAD":
                assert missing.json()["detail"].startswith("missing token")
            for token in wrong:
                refused = http.request(method, path, json=body, headers=_bearer(token))
                assert refused.status_code == 401, (method, path, token)
                assert 'error="invalid_token"' in refused.headers["www-authenticate"]
            assert http.request(method, path, json=body, headers=_bearer(right)).status_code != 401, (method, path)


def test_experiments_without_a_token_of_their_own_take_the_global_one(secured: RunningServer) -> None:
    with httpx.Client(base_url=secured.url, timeout=10) as http:
        assert http.get("/experiments/exp3/v1/agl/rollouts", headers=_bearer(GLOBAL)).status_code == 200
        assert http.get("/experiments/exp3/v1/agl/rollouts", headers=_bearer(TOKEN_1)).status_code == 401
        assert http.get("/experiments/exp3/v1/agl/rollouts").status_code == 401
        # The default experiment takes the same token under its prefix as at the root.
        assert http.get("/experiments/default/v1/agl/rollouts", headers=_bearer(GLOBAL)).status_code == 200


def test_per_experiment_tokens_keep_experiments_apart(secured: RunningServer) -> None:
    with httpx.Client(base_url=secured.url, timeout=10) as http:
        made = http.post("/experiments/exp1/v1/agl/queues/rollouts/enqueue", headers=_bearer(TOKEN_1),
                         json={"rollouts": [{"input": {"q": 1}}]})
        assert made.is_success
        rollout_id = made.json()[0]["rollout_id"]
        assert http.get(f"/experiments/exp1/v1/agl/rollouts/{rollout_id}", headers=_bearer(TOKEN_2)).status_code == 401
        assert http.get(f"/experiments/exp2/v1/agl/rollouts/{rollout_id}", headers=_bearer(TOKEN_2)).json() is None
        found = http.get(f"/experiments/exp1/v1/agl/rollouts/{rollout_id}", headers=_bearer(TOKEN_1))
        assert found.json()["input"] == {"q": 1}


def test_the_token_as_basic_auth_password_is_accepted(secured: RunningServer) -> None:
    with httpx.Client(base_url=secured.url, timeout=10) as http:
        assert http.get("/experiments/exp2/v1/agl/rollouts", auth=("anyone", TOKEN_2)).status_code == 200
        assert http.get("/experiments/exp2/v1/agl/rollouts", auth=(TOKEN_2, "")).status_code == 401
        assert http.get("/experiments/exp2/v1/agl/rollouts", auth=("anyone", TOKEN_1)).status_code == 401


def test_no_tokens_leave_every_route_open(start_server: Callable[..., RunningServer]) -> None:
    running = start_server(_memory_store)
    with httpx.Client(base_url=running.url, timeout=10) as http:
        assert http.get("/v1/agl/rollouts").status_code == 200
        assert http.get("/experiments/exp1/v1/agl/rollouts").status_code == 200
        assert http.get("/metrics").status_code == 200


async def test_our_client_sends_the_token(secured: RunningServer) -> None:
    url = f"{secured.url}/experiments/exp1"
    client, anonymous = StoreClient(url, auth_token=TOKEN_1), StoreClient(url)
    try:
        [rollout] = await client.enqueue_many([EnqueueRolloutRequest(input={"n": 1})])
        assert [r.rollout_id for r in await client.query_rollouts()] == [rollout.rollout_id]
        claim = await client.claim(rollout.rollout_id, "w1")
        assert claim is not None
        reserve = client.sequence_reserver(rollout.rollout_id, claim.rollout.attempt.attempt_id)  # the blocking client
        assert [reserve(), reserve()] == [claim.reserved_through + 1, claim.reserved_through + 2]
        with pytest.raises(StoreAuthError, match="AGL_AUTH_TOKEN"):
            await anonymous.query_rollouts()
    finally:
        await client.close()
        await anonymous.close()


@pytest.mark.parametrize("how", ["option", "environment"])
def test_produce_via_the_store_sends_the_token(secured: RunningServer, tmp_path: Path, how: str) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"input": {"q": 1}}\n{"input": {"q": 2}}\n')
    command = [sys.executable, "-m", "agl_events", "--experiment", "exp1", "produce", "tasks", str(tasks),
               "--via-store", "--store-url", secured.url]
    environ = {k: v for k, v in os.environ.items() if k != "AGL_AUTH_TOKEN"}
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, env=environ)
    assert refused.returncode == 2 and "the store refused" in refused.stdout + refused.stderr, refused.stderr
    if how == "option":
        command += ["--auth-token", TOKEN_1]
    else:
        environ["AGL_AUTH_TOKEN"] = TOKEN_1
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=environ)
    assert done.returncode == 0, done.stdout + done.stderr
    rollouts = httpx.get(f"{secured.url}/experiments/exp1/v1/agl/rollouts", headers=_bearer(TOKEN_1)).json()
    assert sorted(r["input"]["q"] for r in rollouts["items"]) == [1, 2]


async def test_upstream_client_with_the_token_in_its_url(secured: RunningServer) -> None:
    from agentlightning.store.client_server import LightningStoreClient
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    url = f"{secured.url}/experiments/exp1"
    client = LightningStoreClient(url_with_token(url, TOKEN_1), retry_delays=(), health_retry_delays=())
    anonymous = LightningStoreClient(url, retry_delays=(), health_retry_delays=())
    wrong = LightningStoreClient(url_with_token(url, TOKEN_2), retry_delays=(), health_retry_delays=())
    try:
        attempted = await client.start_rollout(input={"q": "2+2"})
        # Its OTLP endpoint carries the token too, and the SDK's exporter (requests) sends it.
        provider = TracerProvider(resource=Resource.create({
            "agentlightning.rollout_id": attempted.rollout_id,
            "agentlightning.attempt_id": attempted.attempt.attempt_id}))
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=client.otlp_traces_endpoint(),
                                                                         timeout=5)))
        with provider.get_tracer("tests").start_as_current_span("think"):
            pass
        provider.shutdown()
        assert [s.name for s in await client.query_spans(attempted.rollout_id)] == ["think"]
        for refused in (anonymous, wrong):
            with pytest.raises(aiohttp.ClientResponseError) as raised:
                await refused.query_rollouts()
            assert raised.value.status == 401
    finally:
        for each in (client, anonymous, wrong):
            await each.close()


@pytest.mark.kafka
async def test_runners_send_the_token_of_their_settings(settings: Settings, tmp_path: Path) -> None:
    secured = settings.model_copy(update={"auth_token": SecretStr("runner-secret")})
    async with embedded_store_server(secured, tmp_path / "view") as (store, url):
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{url}/v1/agl/rollouts")).status_code == 401
        pool = RunnerPool(RunnerConfig(settings=secured, store_url=url, agent="x"), 1, agent=counting_agent)
        pool.start()
        try:
            queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input={"i": i}) for i in range(5)])
            ids = [r.rollout_id for r in queued]
            done = await store.wait_for_rollouts(rollout_ids=ids, timeout=120)
            assert sorted(r.status for r in done) == ["succeeded"] * 5
            for rollout_id in ids:
                assert len(await store.query_spans(rollout_id)) == SPANS_PER_ROLLOUT
        finally:
            pool.stop(grace=30)


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("Bearer", None), (None, None), ("Token abc", None),
    ("Basic " + base64.b64encode(b"agl:p:w").decode(), "p:w"), ("Basic " + base64.b64encode(b"agl").decode(), None),
    ("Basic !!!", None),
])
def test_presented_token(header: str | None, token: str | None) -> None:
    assert presented_token(header) == token


@pytest.mark.parametrize(("path", "experiment"), [
    ("/v1/agl/rollouts", "default"), ("/v1/traces", "default"), ("/experiments/e1/v1/agl/x", "e1"),
    ("/experiments/e1", "e1"), ("/metrics", None), ("/openapi.json", None), ("/", None),
])
def test_experiment_of(path: str, experiment: str | None) -> None:
    assert experiment_of(path, "default") == experiment


def test_token_settings_never_show_a_token(tmp_path: Path) -> None:
    assert GLOBAL not in repr(TOKENS) and TOKEN_1 not in repr(TOKENS) and "exp1" in repr(TOKENS)
    assert "runner-secret" not in repr(Settings(auth_token=SecretStr("runner-secret")))
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"exp1": "tok1", "exp2": ""}')
    with pytest.raises(AuthConfigError, match="non-empty tokens") as raised:
        load_experiment_tokens(tokens)
    assert "tok1" not in str(raised.value)
    tokens.write_text('{"exp1": "tok1"')
    with pytest.raises(AuthConfigError, match="not valid JSON") as raised:
        load_experiment_tokens(tokens)
    assert "tok1" not in str(raised.value)
    tokens.write_text('{"exp1": "tok1"}')
    assert load_experiment_tokens(tokens) == {"exp1": "tok1"}

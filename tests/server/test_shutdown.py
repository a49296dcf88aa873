"""The store server ends when told to and when its store cannot serve, and costs nothing while idle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentlightning.store.client_server import LightningStoreClient

from agl_events.config import Settings
from agl_events.events.kinds import Kind
from agl_events.log.records import event
from agl_events.proc.ports import free_port
from agl_events.reducers import REDUCERS
from agl_events.server.app import create_app, server_for
from agl_events.server.process import StoreProcess
from agl_events.store.memory import InMemoryLightningStore
from tests.eventually import eventually, eventually_async


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.kafka
def test_idle_server_uses_no_cpu_and_sigterm_ends_it_with_waiters_open(settings: Settings, tmp_path: Path) -> None:
    server = StoreProcess(settings, tmp_path / "views", tmp_path / "server.log")
    server.start()
    assert server.process is not None
    try:
        before = _cpu_seconds(server.process.pid)
        time.sleep(10.0)
        idle = (_cpu_seconds(server.process.pid) - before) / 10.0
        print(f"idle store server: {idle:.1%} of a core")
        assert idle < 0.02, f"an idle server used {idle:.1%} of a core"

        rid = httpx.post(f"{server.base}/queues/rollouts/enqueue",
                         json={"rollouts": [{"input": 1}]}).json()[0]["rollout_id"]
        answers: list[Any] = []

        def wait(timeout: float | None) -> None:  # long polls that would outlive any shutdown
            with httpx.Client(timeout=60) as client:
                answers.append(client.post(f"{server.base}/waits/rollouts",
                                           json={"rollout_ids": [rid], "timeout": timeout}).status_code)

        waiters = [threading.Thread(target=wait, args=(t,), daemon=True) for t in (None, 3600.0)]
        for waiter in waiters:
            waiter.start()
        idle_sessions = [httpx.Client() for _ in range(3)]  # keep-alive connections nobody closes
        for session in idle_sessions:
            session.get(f"{server.base}/statistics").raise_for_status()
        upstream = LightningStoreClient(server.base.removesuffix("/v1/agl"))  # its aiohttp session stays open
        asyncio.run(upstream.query_rollouts())
        eventually(lambda: _in_progress(server.url), "the long polls waiting in the server",
                   until=lambda calls: calls >= len(waiters))

        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(10)  # raises TimeoutExpired if it hangs
        print(f"SIGTERM to exit: {time.monotonic() - started:.2f} s")
        for waiter in waiters:
            waiter.join(5)
        assert answers == [200, 200]  # the long polls were answered (with nothing finished), not cut off
        assert "Waiting for background tasks" not in (tmp_path / "server.log").read_text()
    finally:
        server.stop()


def _poison(store: InMemoryLightningStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the store's next fold raise, as a reducer bug or a RocksDB error would, and give it an event."""
    def broken(pending: Any, record: dict[str, Any]) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(REDUCERS, Kind.WORKER_HEARTBEAT, broken)
    store.log.append_now([event(Kind.WORKER_HEARTBEAT, "w1", time.time(), "runner-x", worker_id="w1")])


async def _opened(store: InMemoryLightningStore) -> InMemoryLightningStore:
    return store


async def test_a_store_that_stops_serving_reports_unhealthy(monkeypatch: pytest.MonkeyPatch) -> None:
    """/v1/agl/health and /metrics say so, and calls get 503 with the reason."""
    store = InMemoryLightningStore()
    app = create_app(lambda name: _opened(store))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://store") as client:
        assert (await client.get("/v1/agl/rollouts")).status_code == 200  # opens and starts the store
        assert (await client.get("/v1/agl/health")).json() == {"status": "ok"}
        assert 'agl_store_healthy{experiment="default"} 1.0' in (await client.get("/metrics")).text
        _poison(store, monkeypatch)
        await eventually_async(lambda: store.failure, "the store failed", within=10)
        health = await client.get("/v1/agl/health")
        assert health.status_code == 503 and "disk on fire" in health.json()["detail"]
        assert 'agl_store_healthy{experiment="default"} 0.0' in (await client.get("/metrics")).text
        call = await client.post("/v1/agl/queues/rollouts/enqueue", json={"rollouts": [{"input": 1}]})
        assert call.status_code == 503 and "disk on fire" in call.json()["detail"]
    await store.close()


async def test_a_store_that_stops_serving_ends_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server shuts itself down (`serve` then exits with status 1, for a supervisor to restart it)."""
    store = InMemoryLightningStore()
    port = free_port()
    server = server_for(create_app(lambda name: _opened(store)), "127.0.0.1", port, log_level="warning")
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    serving = asyncio.create_task(server.serve())
    await eventually_async(lambda: server.started, "uvicorn started", within=10)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        assert (await client.get("/v1/agl/rollouts")).status_code == 200
    _poison(store, monkeypatch)
    await asyncio.wait_for(serving, 10)
    assert str(server.failed) == "disk on fire" and store.closed


#: Experiments a shutdown test's server holds: closing them one by one used to take minutes.
MANY = 52


def _enqueue(url: str, experiment: str, client: httpx.Client) -> str:
    answer = client.post(f"{url}/experiments/{experiment}/v1/agl/queues/rollouts/enqueue",
                         json={"rollouts": [{"input": experiment}]})
    assert answer.status_code < 300, answer.text
    return str(answer.json()[0]["rollout_id"])


def _serve_many(server: StoreProcess, prefix: str) -> None:
    """One enqueue on each of MANY new experiments, as a team sharing one server would (store groups on)."""
    with httpx.Client(timeout=60) as client:
        for i in range(MANY):
            _enqueue(server.url, f"{prefix}-{i}", client)


def _in_progress(url: str) -> float:
    """POST requests the server is serving now, from its /metrics."""
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith('agl_http_requests_in_progress{method="POST"}'):
            return float(line.split()[-1])
    return 0.0


def _sigterm_ends(server: StoreProcess, *, all_closed: bool = True) -> None:
    """SIGTERM ends `server` within 10 s; with `all_closed`, every store closed within its bound too."""
    assert server.process is not None
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(10)  # raises TimeoutExpired if it hangs
    print(f"SIGTERM to exit with {MANY}+ experiments: {time.monotonic() - started:.2f} s")
    assert server.process.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
    assert "Traceback" not in server.tail(200)
    assert not all_closed or "did not close" not in server.tail(200)


@pytest.mark.kafka
def test_sigterm_ends_an_idle_server_that_served_many_experiments(settings: Settings, tmp_path: Path) -> None:
    """Every experiment's background work (store group, follower, writers, ingester) ends, all closed together."""
    server = StoreProcess(settings, tmp_path / "views", tmp_path / "server.log")
    server.start()
    try:
        _serve_many(server, settings.experiment)
        _sigterm_ends(server)
    finally:
        server.stop()


@pytest.mark.kafka
def test_sigterm_ends_a_server_with_calls_waiting_for_an_owner_that_does_not_answer(
        settings: Settings, tmp_path: Path) -> None:
    """Among many experiments, one shared with a second store that froze (SIGSTOP) while owning partitions:
    calls for its rollouts wait on it; they are answered or cut off, and the server still exits."""
    server = StoreProcess(settings, tmp_path / "views", tmp_path / "server.log")
    frozen = StoreProcess(settings, tmp_path / "views-frozen", tmp_path / "frozen.log")
    shared = f"{settings.experiment}-shared"
    server.start()
    frozen.start()
    try:
        _serve_many(server, settings.experiment)
        with httpx.Client(timeout=60) as client:
            ids = [_enqueue(frozen.url, shared, client) for _ in range(6)]  # the frozen store owns them all
            _enqueue(server.url, shared, client)  # the server joins the experiment's store group
        assert frozen.process is not None and server.process is not None
        frozen.process.send_signal(signal.SIGSTOP)
        answers: list[int | str] = []

        def start_attempt(rid: str) -> None:  # forwarded to the owner, which does not answer
            try:
                answers.append(httpx.post(f"{server.url}/experiments/{shared}/v1/agl/rollouts/{rid}/attempts",
                                          timeout=60).status_code)
            except httpx.HTTPError as exc:
                answers.append(type(exc).__name__)

        callers = [threading.Thread(target=start_attempt, args=(rid,), daemon=True) for rid in ids]
        for caller in callers:
            caller.start()
        eventually(lambda: _in_progress(server.url), "the calls waiting in the server",
                   until=lambda calls: calls >= len(ids))
        _sigterm_ends(server, all_closed=False)  # the shared experiment's store may be left as a crash leaves it
        for caller in callers:
            caller.join(10)
        # each answered: 503 at once (retry elsewhere), or 201 where the group handed the frozen store's partitions
        # to this server (its 6 s session ran out under load) before the SIGTERM; never left hanging or a 500
        assert len(answers) == len(ids) and set(answers) <= {201, 503}, answers
    finally:
        if frozen.process is not None:
            frozen.process.send_signal(signal.SIGCONT)
        server.stop()
        frozen.kill9()

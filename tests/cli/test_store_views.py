"""`agl-events store` processes and their views folders, as a user starts them: one writing store per views
folder (a second is refused at start, naming the holder and the flag), `--views` for a second store of an
experiment on one machine, read-only stores beside a live one, and views that cannot be opened (503)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agl_events.config import Settings
from agl_events.server.embedded import embedded_store_server
from agl_events.server.process import StoreProcess
from agl_events.views.rocks import RocksKV
from tests.eventually import eventually_async

pytestmark = pytest.mark.kafka

REFUSAL = "give this store a folder of its own with --views DIR"


def _on_home(settings: Settings, home: Path) -> Settings:
    return settings.model_copy(update={"home": home})


def _second_store(settings: Settings, *options: str) -> subprocess.CompletedProcess[str]:
    """`agl-events store` on the home of `settings` without --views: the default views, <home>/views. A store
    that is not refused serves until the timeout, which fails the test."""
    return subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "--experiment", settings.experiment, "--home", str(settings.home), "store", "--port",
                           "0", "--log-level", "warning", *options], capture_output=True, text=True, timeout=60)


def _enqueue(store: StoreProcess, value: int) -> httpx.Response:
    return httpx.post(f"{store.base}/queues/rollouts/enqueue", json={"rollouts": [{"input": value}]}, timeout=60)


def _refusal_of(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused store printed (asserting it is one line, with no traceback, and exit code 2)."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_second_store_on_one_home_exits_at_once_naming_the_holder_and_views_lets_both_run(
        settings: Settings, tmp_path: Path) -> None:
    settings = _on_home(settings, tmp_path / "home")
    views = settings.home / "views"
    first = StoreProcess(settings, views, tmp_path / "first.log")  # --views <home>/views: the default folder
    try:
        first.start()
        assert _enqueue(first, 1).status_code == 201

        line = _refusal_of(_second_store(settings))
        assert line.startswith(f"agl-events store: the views folder {views} is in use by pid {first.pid} (")
        assert f"-m agl_events --bootstrap {settings.bootstrap_servers}" in line and f"--port {first.port}" in line
        assert line.endswith(REFUSAL)
        assert first.alive() and _enqueue(first, 2).status_code == 201  # the first kept serving

        second = StoreProcess(settings, tmp_path / "second-views", tmp_path / "second.log")  # as the line says
        try:
            second.start()
            assert _enqueue(second, 3).status_code == 201 and _enqueue(first, 4).status_code == 201
        finally:
            second.stop()
    finally:
        first.stop()


def test_a_sigkilled_store_leaves_no_stale_lock(settings: Settings, tmp_path: Path) -> None:
    settings = _on_home(settings, tmp_path / "home")
    views = settings.home / "views"
    # --single: no store group, whose failover (a session timeout) is not what this test is about.
    killed = StoreProcess(settings, views, tmp_path / "killed.log", "--single")
    try:
        killed.start()
    finally:
        killed.kill9()
    assert killed.returncode is not None

    after = StoreProcess(settings, views, tmp_path / "after.log", "--single")
    try:
        after.start()
        assert _enqueue(after, 1).status_code == 201
        line = _refusal_of(_second_store(settings))  # the lock names the live holder, not the killed one
        assert f"in use by pid {after.pid} (" in line
    finally:
        after.stop()


def test_replay_rebuild_refuses_a_folder_a_live_store_holds(settings: Settings, tmp_path: Path) -> None:
    settings = _on_home(settings, tmp_path / "home")
    views = settings.home / "views"
    live = StoreProcess(settings, views, tmp_path / "live.log")
    try:
        live.start()
        # An experiment the live store has not opened yet: its folder is free now, and the store would open
        # it (RocksDB LOCK) or serve whatever the rebuild wrote there.
        result = subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                                 "--experiment", settings.experiment, "--home", str(settings.home), "replay",
                                 "rebuild", "--to", str(views / f"{settings.experiment}-copy")],
                                capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"the views folder {views} is in use by pid {live.pid} (" in result.stderr
        assert "rebuild into a folder outside it with --to DIR" in result.stderr
        assert "Traceback" not in result.stderr and not (views / f"{settings.experiment}-copy").exists()
    finally:
        live.stop()


async def test_a_read_only_store_serves_the_views_a_live_store_holds(settings: Settings, tmp_path: Path) -> None:
    views = tmp_path / "views"
    async with embedded_store_server(settings, views / settings.experiment, scan_debounce_seconds=3600) as (live, _):
        rollout = await live.enqueue_rollout(input={"n": 1})
        reader = StoreProcess(settings, views, tmp_path / "reader.log", "--read-only")
        try:
            reader.start()
            found = httpx.get(f"{reader.base}/rollouts", timeout=30)
            assert found.status_code == 200, found.text
            assert [r["rollout_id"] for r in found.json()["items"]] == [rollout.rollout_id]
            assert _enqueue(reader, 2).status_code == 405
            assert "Unhandled error" not in reader.tail(200)  # a refused write is no server fault
            await live.enqueue_rollout(input={"n": 3})  # the live store still writes its view
        finally:
            reader.stop()


async def test_a_view_that_cannot_be_opened_is_a_503_with_the_reason_and_unhealthy(settings: Settings,
                                                                                    tmp_path: Path) -> None:
    views = tmp_path / "views"
    held = RocksKV(views / settings.experiment)  # another writer of that folder, which no lock file announces
    store = StoreProcess(settings, views, tmp_path / "store.log")
    answers: list[httpx.Response] = []

    async def answered() -> bool:
        async with httpx.AsyncClient(timeout=30) as client:
            try:
                answers.append(await client.get(f"{store.base}/statistics"))
            except httpx.TransportError:  # not listening yet
                return False
            return True

    try:
        store.start(wait=False)
        await eventually_async(answered, "the store answers", within=60)
        assert answers[-1].status_code == 503, answers[-1].text
        assert f"the view in {views / settings.experiment} cannot be opened" in answers[-1].json()["detail"]
        health = httpx.get(f"{store.base}/health", timeout=10)
        assert health.status_code == 503 and "cannot be opened" in health.json()["detail"]
        assert "Unhandled error" not in store.tail(200)
    finally:
        store.stop()
        held.close()

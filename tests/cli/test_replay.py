"""`agl-events replay rebuild | verify | snapshot | snapshots` and `agl-events store --read-only --as-of...` as a
user runs them: subprocesses against a live store on the real broker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agentlightning.store.client_server import LightningStoreClient

from agl_events.config import Settings
from agl_events.server.embedded import embedded_store_server
from agl_events.server.process import StoreProcess
from tests.reducers.workload import workload
from tests.store import prompt

pytestmark = pytest.mark.kafka


def _cli(settings: Settings, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "--experiment", settings.experiment, "--home", str(home), "replay", *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


async def _in_thread(settings: Settings, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(_cli, settings, home, *args)


async def test_verify_says_equal_for_a_fresh_rebuild_and_shows_the_first_difference_of_a_stale_one(
        settings: Settings, tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with embedded_store_server(settings, tmp_path / "live", scan_debounce_seconds=3600) as (store, url):
        base = url.split("/experiments/")[0]
        work = workload(store, seed=11)
        await work.run(60)
        stale = await _in_thread(settings, home, "rebuild", "--to", str(tmp_path / "stale"))
        assert stale.returncode == 0, stale.stdout + stale.stderr
        assert "from offset 0" in stale.stdout and "records/s" in stale.stdout
        await work.run(60)

        fresh = await _in_thread(settings, home, "verify", "--store-url", base)
        assert fresh.returncode == 0, fresh.stdout + fresh.stderr
        assert "equal" in fresh.stdout and "different" not in fresh.stdout

        behind = await _in_thread(settings, home, "verify", "--store-url", base, "--view", str(tmp_path / "stale"))
        assert behind.returncode == 1, behind.stdout + behind.stderr
        assert "different: first at " in behind.stdout

    again = _cli(settings, home, "rebuild", "--to", str(tmp_path / "stale"))
    assert again.returncode == 1 and "not empty" in again.stdout and "Traceback" not in again.stderr


def test_snapshots_are_taken_listed_and_used_by_the_next_rebuild(settings: Settings, tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def history() -> None:
        async with embedded_store_server(settings, tmp_path / "live", scan_debounce_seconds=3600) as (store, _):
            await workload(store, seed=13).run(60)

    asyncio.run(history())
    none = _cli(settings, home, "snapshots")
    assert none.returncode == 1 and "no snapshots" in none.stdout
    taken = _cli(settings, home, "snapshot", "--keep", "1")
    assert taken.returncode == 0, taken.stdout + taken.stderr
    recent = _cli(settings, home, "snapshot", "--keep", "2", "--prune-spans", "--keep-spans-for", "1h")
    assert recent.returncode == 0, recent.stdout + recent.stderr
    kept_all = _cli(settings, home, "rebuild", "--to", str(tmp_path / "all-spans"), "--no-snapshot")
    assert kept_all.returncode == 0, kept_all.stdout  # the last hour's spans were kept
    assert _cli(settings, home, "snapshot", "--keep", "1", "--prune-spans").returncode == 0
    kept = list((home / "snapshots" / settings.experiment).iterdir())
    assert len(kept) == 1  # --keep 1 deleted the first
    listed = _cli(settings, home, "snapshots")
    assert listed.returncode == 0 and listed.stdout.count(kept[0].name) == 2  # its name and its path
    rebuilt = _cli(settings, home, "rebuild", "--to", str(tmp_path / "view"))
    assert rebuilt.returncode == 0 and "from snapshot" in rebuilt.stdout and ": 0 records" in rebuilt.stdout
    pruned = _cli(settings, home, "rebuild", "--to", str(tmp_path / "from-zero"), "--no-snapshot")
    assert pruned.returncode == 1 and "deleted the records" in pruned.stdout


def test_bad_cut_options_are_one_clear_line(settings: Settings, tmp_path: Path) -> None:
    both = _cli(settings, tmp_path, "rebuild", "--to", str(tmp_path / "v"), "--until", "0", "--until-resources", "x")
    assert both.returncode == 2 and "give one of" in both.stderr
    bad = _cli(settings, tmp_path, "rebuild", "--to", str(tmp_path / "v"), "--until", "yesterday")
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr
    alone = _cli(settings, tmp_path, "snapshot", "--keep-spans-for", "7d")
    assert alone.returncode == 2 and "needs --prune-spans" in alone.stderr
    week = _cli(settings, tmp_path, "snapshot", "--prune-spans", "--keep-spans-for", "a week")
    assert week.returncode == 2 and "is not a duration" in week.stderr


async def test_a_read_only_store_as_of_a_resources_version_serves_the_upstream_client(settings: Settings,
                                                                                     tmp_path: Path) -> None:
    async with embedded_store_server(settings, tmp_path / "live", scan_debounce_seconds=3600) as (store, _):
        early = await store.enqueue_rollout(input={"n": 1})
        version = await store.add_resources({"main": prompt("v1 {name}")})
        await asyncio.sleep(0.005)  # record timestamps are milliseconds
        await store.enqueue_rollout(input={"n": 2})
        await store.add_resources({"main": prompt("v2 {name}")})

    server = StoreProcess(settings, tmp_path / "unused", tmp_path / "server.log", "--read-only", "--as-of-resources",
                    version.resources_id)
    server.start()
    try:
        upstream = LightningStoreClient(server.base.removesuffix("/v1/agl"))
        try:
            rollouts = await upstream.query_rollouts()
            latest = await upstream.get_latest_resources()
            assert [r.rollout_id for r in rollouts] == [early.rollout_id]
            assert latest is not None and latest.resources_id == version.resources_id
            with pytest.raises(Exception, match=r"405|read-only"):
                await upstream.enqueue_rollout(input={"n": 3})
        finally:
            await upstream.close()
        refused = httpx.post(f"{server.base}/queues/rollouts/enqueue", json={"rollouts": [{"input": 1}]})
        assert refused.status_code == 405 and "read-only" in refused.json()["detail"]
        assert "as of" not in refused.json()["detail"] or version.resources_id in refused.json()["detail"]
    finally:
        server.stop()

"""`agl-events experiments list | describe | delete` as a user runs them, against what a store wrote."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agl_events.config import Settings
from agl_events.log.clients import make_admin
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import LAYOUT
from tests.store import llm

pytestmark = pytest.mark.kafka


@pytest.fixture
def home(settings: Settings, tmp_path: Path) -> Path:
    """A home whose views/<experiment> folder is the view of a store that wrote two rollouts and one resources."""
    async def write() -> None:
        store = await KafkaLightningStore.open(settings.model_copy(update={"home": tmp_path}))
        try:
            await store.enqueue_rollout({"q": 1})
            await store.enqueue_rollout({"q": 2})
            await store.add_resources({"main": llm("a")})
        finally:
            await store.close()

    asyncio.run(write())
    assert (tmp_path / "views" / settings.experiment).is_dir()
    return tmp_path


def _cli(settings: Settings, home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, in a terminal wide enough for its tables (a pipe gets rich's 80 columns)."""
    return subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "--home", str(home), "experiments", *args],
                          input=stdin, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def _topics(settings: Settings) -> list[str]:
    names = make_admin(settings.bootstrap_servers).list_topics(timeout=10).topics
    return [t for t in names if t.startswith(f"agl.{settings.experiment}.")]


def test_list_shows_the_experiment_and_json_parses(settings: Settings, home: Path) -> None:
    table = _cli(settings, home, "list")
    assert table.returncode == 0 and settings.experiment in table.stdout
    done = _cli(settings, home, "list", "--json")
    assert done.returncode == 0
    mine = [e for e in json.loads(done.stdout)["experiments"] if e["name"] == settings.experiment]
    assert len(mine) == 1 and mine[0]["topic_count"] == len(LAYOUT) and mine[0]["model_versions"] == 1
    assert mine[0]["events"] == 5 and mine[0]["size_bytes"] > 0  # 2 enqueued, 2 dispatched, 1 resources


def test_describe_shows_each_topic_and_an_unknown_experiment_exits_1(settings: Settings, home: Path) -> None:
    table = _cli(settings, home, "describe", settings.experiment)
    assert table.returncode == 0, table.stderr
    assert f"agl.{settings.experiment}.*" in table.stdout and "compact" in table.stdout
    assert all(spec.topic.value in table.stdout for spec in LAYOUT)
    done = _cli(settings, home, "describe", settings.experiment, "--json")
    described = json.loads(done.stdout)
    assert done.returncode == 0 and described["events"] == 5 and len(described["topics"]) == len(LAYOUT)
    resources = next(t for t in described["topics"] if t["name"].endswith(".resources"))
    assert resources["cleanup_policy"] == "compact" and resources["records"] == 1
    unknown = _cli(settings, home, "describe", f"{settings.experiment}-none")
    assert unknown.returncode == 1 and "Traceback" not in unknown.stdout + unknown.stderr
    assert unknown.stdout.strip().splitlines() == [
        f"no experiment {settings.experiment}-none on {settings.bootstrap_servers} "
        f"(no topic agl.{settings.experiment}-none.*)"]


def test_delete_asks_first_and_removes_the_topics_and_the_view(settings: Settings, home: Path) -> None:
    view = home / "views" / settings.experiment
    kept = _cli(settings, home, "delete", settings.experiment, stdin="n\n")
    assert kept.returncode == 1
    assert f"Delete experiment {settings.experiment}: {len(LAYOUT)} topics, 5 events? [y/N]" in kept.stdout
    assert len(_topics(settings)) == len(LAYOUT) and view.is_dir()

    done = _cli(settings, home, "delete", settings.experiment, "--yes")
    assert done.returncode == 0, done.stderr
    assert _topics(settings) == [] and not view.exists()
    assert all(f"deleted topic {spec.name(settings.experiment)}" in done.stdout for spec in LAYOUT)
    assert f"deleted view folder {view}" in done.stdout
    assert _cli(settings, home, "delete", settings.experiment, "--yes").returncode == 1  # nothing left to delete

"""`agl-events apo history`: what it says with no run to show, and with no store to ask."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from agl_events.config import Settings
from agl_events.server.embedded import embedded_store_server

pytestmark = pytest.mark.kafka


def _history(settings: Settings, store_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "--experiment", settings.experiment, "apo", "history", "--store-url", store_url],
                          capture_output=True, text=True, timeout=120)


def test_an_experiment_without_apo_runs_says_so_and_exits_1(settings: Settings, tmp_path: Path) -> None:
    async def ask() -> subprocess.CompletedProcess[str]:
        async with embedded_store_server(settings, tmp_path / "view") as (_, url):
            return await asyncio.to_thread(_history, settings, url.split("/experiments/")[0])

    done = asyncio.run(ask())
    assert done.returncode == 1 and f"no APO candidates in experiment {settings.experiment}" in done.stdout


def test_an_unreachable_store_is_one_line_and_exit_2(settings: Settings) -> None:
    done = _history(settings, "http://127.0.0.1:1")
    assert done.returncode == 2 and "127.0.0.1:1" in done.stdout and "Traceback" not in done.stdout + done.stderr

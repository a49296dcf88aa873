"""`agl-events produce tasks|status`: 3,000 lines to the task-requests topic with no store running, and through
a real store server; each key one rollout across a second produce and a SIGKILLed store; bad lines by number.

3,000 lines (10,000 until 2026-12-06) are enough for what is checked: two produces of 6,000 records that a store
is SIGKILLed in the middle of ingesting, three `--via-store` batches of 1,000, bad lines first, inside and last.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agl_events.config import Settings
from agl_events.produce.lines import line_key
from agl_events.produce.status import ingest_progress
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.process import StoreProcess
from tests.eventually import eventually
from tests.runner.agents import counting_agent

LINES = 3_000
BAD_LINES = {
    17: "{not json",
    500: json.dumps(["a", "list"]),
    2321: json.dumps({"input": 1, "mode": "training"}),       # not a RolloutMode
    LINES - 1: json.dumps({"input": 1, "config": {"max_attempts": 0}}),
    LINES: json.dumps({"inptu": 1}),                           # a typo: unknown key, and no input
}
GOOD = LINES - len(BAD_LINES)


def _tasks_file(tmp_path: Path) -> tuple[Path, list[str]]:
    lines = [json.dumps({"input": {"i": i}, "mode": "train", "metadata": {"line": i}}) for i in range(1, LINES + 1)]
    for number, bad in BAD_LINES.items():
        lines[number - 1] = bad
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + "\n")
    return tasks, lines


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "--experiment", settings.experiment, *args], capture_output=True, text=True, timeout=300)


def _all_row(status_output: str) -> tuple[int, int, int]:
    """(produced, ingested, pending) from the `all` row of `produce status`."""
    found = re.search(r"all\W+(\d+)\W+(\d+)\W+(\d+)", status_output)
    assert found is not None, status_output
    produced, ingested, pending = map(int, found.groups())
    return produced, ingested, pending


def _pending(settings: Settings) -> int:
    """Produced task requests the store's ingest group has not committed yet."""
    return sum(p.pending for p in ingest_progress(settings.bootstrap_servers, settings.experiment))


def _succeeded(server: StoreProcess) -> int:
    return int(httpx.post(f"{server.base}/rollouts/search", json={"status_in": ["succeeded"], "limit": 1},
                          timeout=30).json()["total"])


def _ingested(server: StoreProcess) -> int:
    return int(httpx.get(f"{server.base}/statistics", timeout=10).json()["total_rollouts"])


@pytest.mark.kafka
def test_lines_to_kafka_with_no_store_become_one_rollout_each(settings: Settings, tmp_path: Path) -> None:
    """Produced twice with no store, ingested by a store SIGKILLed mid-ingest and restarted, run by runners."""
    tasks, lines = _tasks_file(tmp_path)
    for _ in range(2):  # the second run is a user producing the same file again: no rollout twice
        done = _cli(settings, "produce", "tasks", str(tasks))
        print(done.stderr[-1500:])
        assert done.returncode == 1  # some lines were rejected
        assert all(f"line {number}" in done.stderr for number in BAD_LINES)
        assert "producing (acknowledged)" in done.stderr  # the progress bar
        assert str(GOOD) in done.stderr  # acknowledged, in the summary
    before = _cli(settings, "produce", "status")
    assert before.returncode == 0, before.stderr
    assert _all_row(before.stdout) == (2 * GOOD, 0, 2 * GOOD)

    server = StoreProcess(settings, tmp_path / "views", tmp_path / "server.log")
    server.start()
    try:
        # SIGKILL the store once it has ingested some (how many is printed, not asserted)
        ingested = eventually(lambda: _ingested(server), "the store ingested a task request")
        server.kill9()
        print(f"store SIGKILLed with {ingested} rollouts ingested")
        server.start()
        # 8 slots each, as runners are run for throughput
        pool = RunnerPool(RunnerConfig(settings=settings, store_url=f"http://127.0.0.1:{server.port}", agent="x",
                                       concurrency=8), 4, agent=counting_agent)
        pool.start()
        try:
            eventually(lambda: _pending(settings), "the store ingested every task request", within=180,
                       until=lambda pending: pending == 0)
            stats = httpx.get(f"{server.base}/statistics", timeout=10).json()
            assert stats["total_rollouts"] == GOOD
            started = time.monotonic()
            eventually(lambda: _succeeded(server), f"runners finished the {GOOD} rollouts", within=600,
                       until=lambda succeeded: succeeded >= GOOD)
            print(f"4 runners x 8 slots finished them at {GOOD / (time.monotonic() - started):.0f} rollouts/s")
        finally:
            pool.stop(grace=30)
        after = _cli(settings, "produce", "status", "--key", line_key(lines[0]), "--key", "nope",
                     "--store-url", f"http://127.0.0.1:{server.port}")
        assert after.returncode == 0, after.stderr
        assert _all_row(after.stdout) == (2 * GOOD, 2 * GOOD, 0)
        first = httpx.post(f"{server.base}/rollouts/search", json={"limit": 100_000}, timeout=30).json()["items"]
        by_line = {r["metadata"]["line"]: r for r in first}
        assert len(by_line) == GOOD and {r["status"] for r in first} == {"succeeded"}
        assert re.search(rf"{line_key(lines[0])}\W+{by_line[1]['rollout_id']}\W+succeeded", after.stdout)
        assert re.search(r"nope\W+-\W+not ingested", after.stdout)
    finally:
        server.stop()


@pytest.mark.parametrize("command", [["produce", "tasks", "-"], ["produce", "status"], ["topics", "describe"],
                                     ["store"]])
def test_an_unreachable_bootstrap_is_one_line_not_a_traceback(command: list[str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", "127.0.0.1:1", "--kafka-timeout", "0.5",
                           *command], input='{"input": 1}\n', capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line
    assert "cannot reach Kafka at 127.0.0.1:1 within 0.5 s" in done.stderr
    assert "127.0.0.1:1: connection refused" in done.stderr and "--bootstrap" in done.stderr


@pytest.mark.kafka
def test_lines_through_the_store_with_bad_ones(settings: Settings, tmp_path: Path) -> None:
    tasks, _ = _tasks_file(tmp_path)
    server = StoreProcess(settings, tmp_path / "views", tmp_path / "server.log")
    server.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
             "--experiment", settings.experiment, "produce", "tasks", str(tasks), "--via-store",
             "--store-url", f"http://127.0.0.1:{server.port}", "--batch-size", "1000"],
            capture_output=True, text=True, timeout=300)
        print(done.stderr[-1500:])
        assert done.returncode == 1  # some lines were rejected
        for number in BAD_LINES:
            assert f"line {number}" in done.stderr
        assert "enqueuing" in done.stderr  # the progress bar
        stats = httpx.get(f"{server.base}/statistics", timeout=10).json()
        assert stats["total_rollouts"] == GOOD
        page = httpx.get(f"{server.base}/rollouts", params={"limit": 3, "sort_by": "start_time"}, timeout=10).json()
        assert [r["metadata"]["line"] for r in page["items"]] == [1, 2, 3]  # file order kept
    finally:
        server.stop()


@pytest.mark.kafka
def test_an_unreachable_store_is_a_clear_error(settings: Settings, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"input": 1}\n')
    done = subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "produce", "tasks", str(tasks), "--via-store", "--store-url", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "agl-events store" in done.stderr

"""`agl-events produce tasks`: 10k lines through a real store server, bad lines reported by number."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from agl_events.config import Settings
from agl_events.produce import parse_lines
from tests.server.server_process import Server

BAD_LINES = {
    17: "{not json",
    500: json.dumps(["a", "list"]),
    4321: json.dumps({"input": 1, "mode": "training"}),       # not a RolloutMode
    9999: json.dumps({"input": 1, "config": {"max_attempts": 0}}),
    10_000: json.dumps({"inptu": 1}),                          # a typo: unknown key, and no input
}


def test_parse_lines_explains_each_rejection() -> None:
    parsed = dict(parse_lines([BAD_LINES[17], "", BAD_LINES[500], BAD_LINES[10_000], '{"input": {"q": 1}}']))
    assert set(parsed) == {1, 3, 4, 5}  # the blank line is skipped, numbering is the file's
    assert parsed[1].startswith("not JSON")
    assert "expected a JSON object" in parsed[3]
    assert "inptu" in parsed[4] and "input" in parsed[4]
    assert parsed[5].input == {"q": 1}


def test_ten_thousand_lines_with_bad_ones(settings: Settings, tmp_path: Path) -> None:
    lines = [json.dumps({"input": {"i": i}, "mode": "train", "metadata": {"line": i}}) for i in range(1, 10_001)]
    for number, bad in BAD_LINES.items():
        lines[number - 1] = bad
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + "\n")
    server = Server(settings, tmp_path / "views", tmp_path / "server.log")
    server.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
             "--experiment", settings.experiment, "produce", "tasks", str(tasks),
             "--store-url", f"http://127.0.0.1:{server.port}", "--batch-size", "1000"],
            capture_output=True, text=True, timeout=300)
        print(done.stderr[-1500:])
        assert done.returncode == 1  # some lines were rejected
        for number in BAD_LINES:
            assert f"line {number}" in done.stderr
        assert "enqueuing" in done.stderr  # the progress bar
        stats = httpx.get(f"{server.base}/statistics", timeout=10).json()
        assert stats["total_rollouts"] == 10_000 - len(BAD_LINES)
        page = httpx.get(f"{server.base}/rollouts", params={"limit": 3, "sort_by": "start_time"}, timeout=10).json()
        assert [r["metadata"]["line"] for r in page["items"]] == [1, 2, 3]  # file order kept
    finally:
        server.stop()


def test_an_unreachable_store_is_a_clear_error(settings: Settings, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"input": 1}\n')
    done = subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "produce", "tasks", str(tasks), "--store-url", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "agl-events store" in done.stderr

"""The tables of `agl-events status`, rendered from snapshots (pure)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from agl_events.supervise.plan import Kind
from agl_events.supervise.state import PartitionLag, ProcessState, Snapshot, StoreFigures, UpState
from agl_events.supervise.view import render


def _text(snapshot: Snapshot, previous: Snapshot | None = None) -> str:
    console = Console(record=True, width=220)
    console.print(render(snapshot, previous, now=lambda: 1000.0))
    return console.export_text()


def _state() -> UpState:
    return UpState(experiment="e1", bootstrap="kafka:9092", supervisor_pid=42, started_at=880.0, broker_started=False,
                   processes=[
                       ProcessState(name="store-0", kind=Kind.STORE, pid=100, url="http://127.0.0.1:4747", status="up",
                                    started_at=990.0, log=Path("store-0.log")),
                       ProcessState(name="runner-0", kind=Kind.RUNNER, status="restarting", restarts=2, last_exit=-9,
                                    restart_at=1004.0, log=Path("runner-0.log"))])


def test_processes_rates_rollouts_and_lag() -> None:
    before = Snapshot(experiment="e1", taken_at=10.0, spans_end=100, samples_end=7)
    now = Snapshot(experiment="e1", taken_at=12.0, state=_state(), spans_end=160, samples_end=11,
                   lags=[PartitionLag(group="agl-samples-e1", role="samples workers", topic="agl.e1.spans",
                                      partition=3, committed=40, end=52)],
                   group_notes={"agl-events-trainer-e1": "trainer: no committed offsets"},
                   store=StoreFigures(url="http://127.0.0.1:4747", rollouts={"queuing": 3, "running": 0,
                                                                             "succeeded": 12},
                                      resources_id="rs-7", resources_version=7,
                                      owners={1: "http://127.0.0.1:4748", 0: "http://127.0.0.1:4747"}))
    text = _text(now, before)
    assert "supervisor pid 42, up 2m00s" in text
    assert "store-0" in text and "0m10s" in text and "http://127.0.0.1:4747" in text
    assert "runner-0" in text and "restarting in 4 s" in text and "SIGKILL" in text
    assert "spans/s" in text and "30.0" in text and "2.0" in text  # 60 spans and 4 samples over 2 s
    assert "queuing 3, succeeded 12" in text and "running" not in text
    assert "rs-7 (version 7)" in text
    assert "p0 http://127.0.0.1:4747, p1 http://127.0.0.1:4748" in text  # the store group, by partition
    assert "agl-samples-e1" in text and " 52 " in text and " 12 " in text  # end 52, lag 12
    assert "trainer: no committed offsets" in text


def test_without_a_supervisor_or_a_store_it_says_so() -> None:
    text = _text(Snapshot(experiment="e1", taken_at=1.0, kafka_error="cannot reach kafka:9092",
                          store=StoreFigures(url="http://127.0.0.1:4747", error="ConnectError: refused")))
    assert "no supervisor runs for experiment e1" in text
    assert "cannot reach kafka:9092" in text and "ConnectError: refused" in text
    assert "spans/s" not in text and "consumer groups" not in text

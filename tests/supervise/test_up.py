"""`agl-events up | status | down` on the test broker: two stores, a processor, the samples worker and a runner
come up under a supervisor; rollouts enqueued through a store succeed; a SIGKILLed runner is started again and
counted; status shows the processes and the lag; a second `up` adds nothing; `down` leaves no process behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agl_events.proc.pids import process_alive
from agl_events.proc.ports import free_port, port_free
from agl_events.server.process import store_ready
from agl_events.supervise.paths import UpPaths
from agl_events.supervise.state import UpState
from tests.eventually import eventually

pytestmark = pytest.mark.kafka
AGENT = "agl_events.chaos.agent:chaos_agent"
#: Seconds to wait for what `up` starts (stores, runners, rollouts through them) on a loaded machine.
UP = 90.0


def _two_free_ports() -> int:
    while not port_free((port := free_port()) + 1):
        pass
    return port


def _cli(bootstrap: str, experiment: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGL_KAFKA_BOOTSTRAP": bootstrap, "COLUMNS": "220"}  # the test broker, not a broker of home's
    return subprocess.run([sys.executable, "-m", "agl_events", "--experiment", experiment, "--home", str(home), *args],
                          capture_output=True, text=True, timeout=240, env=env)


def _state(paths: UpPaths) -> UpState:
    state = paths.read_state()
    assert state is not None
    return state


def _succeeded(store: str) -> int:
    response = httpx.get(f"{store}/v1/agl/rollouts", params={"status_in": "succeeded", "limit": 1}, timeout=10)
    return int(response.json()["total"])


def test_up_status_restart_down(bootstrap: str, experiment: str, tmp_path: Path) -> None:
    home, port = tmp_path / "home", _two_free_ports()
    paths = UpPaths(home, experiment)
    up = _cli(bootstrap, experiment, home, "up", "--stores", "2", "--processors", "1", "--runners", "1", "--agent",
              AGENT, "--store-port", str(port), "--stop-timeout", "15")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        store_0, store_1 = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"
        assert store_ready(store_0) and store_ready(store_1)  # `up` returned once both answer
        state = _state(paths)
        assert [p.name for p in state.processes] == ["store-0", "store-1", "processor-0", "samples", "runner-0"]
        assert not state.broker_started and state.bootstrap == bootstrap

        batch = [{"input": {"i": i, "step_seconds": 0.01}} for i in range(3)]
        httpx.post(f"{store_0}/v1/agl/queues/rollouts/enqueue", json={"rollouts": batch}, timeout=30
                   ).raise_for_status()
        eventually(lambda: _succeeded(store_0), "3 rollouts succeeded", within=UP, until=lambda n: n == 3)

        [runner] = [p for p in state.processes if p.name == "runner-0"]
        assert runner.pid is not None
        os.kill(runner.pid, signal.SIGKILL)
        eventually(lambda: (r := _state(paths).processes[4]).restarts == 1 and r.status == "up" and r.pid != runner.pid,
                   "the runner started again", within=UP)
        again = _state(paths).processes[4]
        assert again.last_exit == -signal.SIGKILL
        httpx.post(f"{store_0}/v1/agl/queues/rollouts/enqueue", json={"rollouts": batch[:1]}, timeout=30
                   ).raise_for_status()
        eventually(lambda: _succeeded(store_0), "the new runner ran a rollout", within=UP, until=lambda n: n == 4)

        status = _cli(bootstrap, experiment, home, "status", "--interval", "0.5")
        assert status.returncode == 0, status.stdout + status.stderr
        out = status.stdout
        assert f"supervisor pid {state.supervisor_pid}" in out
        runner_row = next(line for line in out.splitlines() if "runner-0" in line)
        assert str(again.pid) in runner_row and "SIGKILL" in runner_row and " 1 " in runner_row
        assert "succeeded 4" in out
        lag_rows = [line for line in out.splitlines() if f"agl-processor-{experiment}" in line
                    and f"agl.{experiment}.rollouts" in line]
        assert lag_rows, out  # the processor group's committed offsets against the partitions' ends

        second = _cli(bootstrap, experiment, home, "up", "--runners", "0")
        assert second.returncode == 0 and "already up" in second.stdout, second.stdout + second.stderr
        assert _state(paths).supervisor_pid == state.supervisor_pid

        pids = [state.supervisor_pid, again.pid] + [p.pid for p in state.processes if p.name != "runner-0"]
        down = _cli(bootstrap, experiment, home, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert [line.split()[1] for line in down.stdout.splitlines()] == [
            "runner-0", "samples", "processor-0", "store-0", "store-1"]
        assert not [pid for pid in pids if pid is not None and process_alive(pid)]
        assert not paths.pid_file.exists()
        assert all(p.status == "stopped" and p.pid is None for p in _state(paths).processes)
        assert "nothing is up" in _cli(bootstrap, experiment, home, "down").stdout
    finally:
        _leave_nothing_running(paths)


def _leave_nothing_running(paths: UpPaths) -> None:
    """After a failure: the supervisor and its children's process groups killed, so no test leaves processes."""
    state, pid = paths.read_state(), paths.supervisor_pid()
    for target in ([pid] if pid else []) + [p.pid for p in (state.processes if state else []) if p.pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(target, signal.SIGKILL)


def test_a_late_store_is_a_clear_error_and_down_cleans_up_after_a_killed_supervisor(bootstrap: str, experiment: str,
                                                                                      tmp_path: Path) -> None:
    """`--wait-timeout` shorter than a store's start: `up` fails naming the store and quoting its log's end, and
    leaves everything running. The supervisor SIGKILLed: `down` still stops the store it had started."""
    home = tmp_path / "home"
    paths = UpPaths(home, experiment)
    up = _cli(bootstrap, experiment, home, "up", "--runners", "0", "--processors", "0", "--no-samples",
              "--store-port", str(_two_free_ports()), "--wait-timeout", "0.1")
    try:
        assert up.returncode == 1, up.stdout + up.stderr
        assert "store-0 did not answer within 0.1 s" in up.stdout and "store-0.log" in up.stdout
        supervisor = paths.supervisor_pid()
        assert supervisor is not None
        eventually(lambda: (state := paths.read_state()) is not None and state.processes[0].pid is not None,
                   "the store started", within=UP)
        store = _state(paths).processes[0].pid
        os.kill(supervisor, signal.SIGKILL)
        eventually(lambda: paths.supervisor_pid() is None, "the supervisor gone", within=UP)
        assert store is not None and process_alive(store)
        down = _cli(bootstrap, experiment, home, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert f"store-0 (pid {store}, killed), left by a supervisor that was gone" in down.stdout
        assert not process_alive(store)
        alone = _cli(bootstrap, experiment, home, "status", "--interval", "0.2").stdout
        assert f"no supervisor runs for experiment {experiment}" in alone and "consumer groups" in alone
    finally:
        _leave_nothing_running(paths)

"""The supervisor driven from outside, as the chaos run drives it: `start`, then `tick` after a SIGKILL notes the
exit and starts the process again once its backoff is due, keeping state.json current at each step; `shutdown`
leaves nothing running. No broker: the plan's store command runs a stand-in interpreter that only sleeps."""

from __future__ import annotations

import time
from pathlib import Path

from agl_events.proc.pids import process_alive
from agl_events.proc.ports import free_port
from agl_events.supervise.paths import UpPaths
from agl_events.supervise.plan import UpOptions, build_plan
from agl_events.supervise.state import ProcessState
from agl_events.supervise.supervisor import Supervisor


def _store_state(paths: UpPaths) -> ProcessState:
    state = paths.read_state()
    assert state is not None
    return next(p for p in state.processes if p.name == "store-0")


def test_a_killed_process_is_restarted_by_ticks_and_state_json_follows(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexec sleep 120\n")
    python.chmod(0o755)
    paths = UpPaths(tmp_path / "home", "exp")
    plan = build_plan(UpOptions(runners=0, processors=0, samples=False, store_port=free_port()), experiment="exp",
                      bootstrap="127.0.0.1:1", home=tmp_path / "home", folder=paths.folder, free_port=free_port,
                      stop_grace=5.0)
    lines: list[str] = []
    supervisor = Supervisor(plan, paths, say=lines.append, python=str(python))
    try:
        supervisor.start()
        first = _store_state(paths)
        assert first.status == "up" and first.pid is not None and process_alive(first.pid)

        supervisor.children["store-0"].kill9()
        assert supervisor.tick()
        crashed = _store_state(paths)
        assert (crashed.status, crashed.last_exit, crashed.pid, crashed.restarts) == ("restarting", -9, None, 0)

        assert supervisor.tick(now=time.monotonic() + 60.0)  # past the backoff
        again = _store_state(paths)
        assert again.status == "up" and again.restarts == 1 and again.pid not in (None, first.pid)
        assert again.pid is not None and process_alive(again.pid)
        assert any("started store-0 again" in line for line in lines)
    finally:
        supervisor.shutdown()
    assert _store_state(paths).status == "stopped" and not supervisor.children["store-0"].alive()

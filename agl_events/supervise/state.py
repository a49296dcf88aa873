"""The files of a supervised experiment under `<home>/up/<experiment>/`, and the state the supervisor keeps
there for `status` and `down` to read:

    supervisor.pid    the supervisor's pid while it runs (removed when it stopped everything)
    plan.json         what it runs (`plan.Plan`), written by `up`
    state.json        processes, pids, ports, restarts, last exit codes, when it started (`UpState`)
    logs/<name>.log   each process's output, appended across restarts (rotated past 20 MB)
    views/, processor/, samples/   the processes' RocksDB folders, kept across restarts and `down`/`up`
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from agl_events.broker.local import command_line, process_alive
from agl_events.supervise.plan import Kind

#: The word in the supervisor's command line that tells it from a process that reused its pid.
SUPERVISE_COMMAND = "supervise"

ProcessStatus = Literal["starting", "up", "restarting", "stopping", "stopped"]


class ProcessState(BaseModel):
    name: str
    kind: Kind
    pid: int | None = None
    port: int | None = None
    url: str | None = None
    status: ProcessStatus = "starting"
    restarts: int = 0
    last_exit: int | None = None
    #: When it was last started (seconds since the epoch).
    started_at: float | None = None
    #: When a crashed process is started again (seconds since the epoch).
    restart_at: float | None = None
    log: Path


class UpState(BaseModel):
    experiment: str
    bootstrap: str
    supervisor_pid: int
    started_at: float
    broker_started: bool
    stopping: bool = False
    processes: list[ProcessState]
    #: What the supervisor stopped when it was asked to (what `down` prints).
    stopped: list[str] = []
    #: When this was written: a reader can tell a supervisor that stopped writing.
    written_at: float = 0.0


class UpPaths:
    """Where the files of experiment `experiment` live under `home`."""

    def __init__(self, home: Path, experiment: str) -> None:
        self.folder = home.expanduser().absolute() / "up" / experiment
        self.pid_file = self.folder / "supervisor.pid"
        self.plan_file = self.folder / "plan.json"
        self.state_file = self.folder / "state.json"
        self.logs = self.folder / "logs"
        self.supervisor_log = self.logs / "supervisor.log"

    def supervisor_pid(self) -> int | None:
        """The pid of this experiment's running supervisor; a pid file left by one that is gone is removed."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        running = command_line(pid) if process_alive(pid) else None
        if running is not None and SUPERVISE_COMMAND in running:
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def read_state(self) -> UpState | None:
        try:
            return UpState.model_validate_json(self.state_file.read_bytes())
        except (OSError, ValidationError):
            return None

    def write_state(self, state: UpState) -> None:
        """Written whole to a temporary file and renamed over the old one, so a reader never sees half of it."""
        state.written_at = time.time()
        temporary = self.state_file.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(state.model_dump_json(indent=2))
        temporary.replace(self.state_file)

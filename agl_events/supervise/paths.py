"""The files of a supervised experiment under `<home>/up/<experiment>/`:

    supervisor.pid    the supervisor's pid while it runs (removed when it stopped everything)
    plan.json         what it runs (`plan.Plan`), written by `up`
    state.json        processes, pids, ports, restarts, last exit codes, when it started (`state.UpState`)
    logs/<name>.log   each process's output, appended across restarts (rotated past 20 MB); supervisor.log its own
    views/, processor/, samples/   the processes' RocksDB folders, kept across restarts and `down`/`up`
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import ValidationError

from agl_events.proc.pids import command_line, process_alive
from agl_events.supervise.state import UpState

#: The word in the supervisor's command line that tells it from a process that reused its pid.
SUPERVISE_COMMAND = "supervise"


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


def supervised_experiments(home: Path) -> list[str]:
    """The experiments under `home` whose supervisor runs (they share the local broker)."""
    root = home.expanduser().absolute() / "up"
    folders = sorted(root.iterdir()) if root.is_dir() else []
    return [folder.name for folder in folders if UpPaths(home, folder.name).supervisor_pid() is not None]

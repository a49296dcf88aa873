"""What the supervisor records and `status` shows (pure data): each process's state, the experiment's
(state.json), and a snapshot of what status reads from Kafka and a store."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from agl_events.supervise.plan import Kind

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


class PartitionLag(BaseModel):
    group: str
    role: str
    topic: str
    partition: int
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


class StoreFigures(BaseModel):
    url: str
    rollouts: dict[str, int] = {}
    resources_id: str | None = None
    resources_version: int | None = None
    #: A store group's owners: rollouts partition -> the store deciding for it (empty outside a group).
    owners: dict[int, str] = {}
    error: str | None = None


class Snapshot(BaseModel):
    experiment: str
    taken_at: float
    #: The supervisor's state, None when no supervisor runs for the experiment.
    state: UpState | None = None
    lags: list[PartitionLag] = []
    #: Groups with nothing to show, and why.
    group_notes: dict[str, str] = {}
    #: Sums of the end offsets of the span and the samples topic: records ever appended.
    spans_end: int = 0
    samples_end: int = 0
    store: StoreFigures | None = None
    kafka_error: str | None = None


def describe_exit(code: int | None) -> str:
    """An exit status as people read it: the number, or the name of the signal that ended the process (SIGKILL for
    -9; a store that stopped cleanly on SIGTERM says SIGTERM, as uvicorn raises the signal again once it is done)."""
    if code is None:
        return ""
    if code < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-code).name
    return str(code)

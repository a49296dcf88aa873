"""Worker events (workers topic) and the request for runners to stop (control topic)."""

from __future__ import annotations

from dataclasses import dataclass

from agl_events.events.typed.base import Decided


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerHeartbeat(Decided):
    """update_worker: the worker is alive; its heartbeat stats replaced when `stats_given`."""

    worker_id: str
    stats_given: bool = False
    heartbeat_stats_json: str | None = None

    @property
    def key(self) -> str:
        return self.worker_id


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerStatusChanged(Decided):
    """The worker's status or current work changed; absent (None) times keep their previous value."""

    worker_id: str
    status: str
    last_dequeue_time: float | None = None
    last_busy_time: float | None = None
    last_idle_time: float | None = None
    current_rollout_id: str | None = None
    current_attempt_id: str | None = None

    @property
    def key(self) -> str:
        return self.worker_id


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnersStopRequested(Decided):
    """Runners should stop taking tasks: the one named by `worker_id`, or every runner when it is None."""

    worker_id: str | None = None
    reason: str = ""

    @property
    def key(self) -> str:
        return self.worker_id or "*"

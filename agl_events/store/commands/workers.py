"""Worker decisions: heartbeats, and keeping a worker's status in step with its attempts."""

from __future__ import annotations

from typing import Any

import orjson

from agl_events.events.jsontext import dumps
from agl_events.events.typed import WorkerHeartbeat, WorkerStatusChanged
from agl_events.store.context import DecisionContext
from agl_events.types import UNSET


def sync_worker_with_attempt(ctx: DecisionContext, attempt: dict[str, Any], dequeue: bool = False) -> None:
    """Upstream's worker rule: finished -> idle, timeout/unresponsive -> unknown, anything else -> busy."""
    wid = attempt["worker_id"]
    if not wid:
        return
    now = ctx.now
    dequeued = now if dequeue else None
    if attempt["status"] in ("succeeded", "failed"):
        changed = WorkerStatusChanged(worker_id=wid, status="idle", last_dequeue_time=dequeued, last_idle_time=now)
    elif attempt["status"] in ("timeout", "unresponsive"):
        changed = WorkerStatusChanged(worker_id=wid, status="unknown", last_dequeue_time=dequeued,
                                      last_idle_time=now)
    else:
        changed = WorkerStatusChanged(worker_id=wid, status="busy", last_dequeue_time=dequeued, last_busy_time=now,
                                      current_rollout_id=attempt["rollout_id"],
                                      current_attempt_id=attempt["attempt_id"])
    ctx.emit(changed)


def mark_idle_after_empty_dequeue(ctx: DecisionContext, wid: str) -> None:
    worker = ctx.worker(wid)
    now = ctx.now
    if worker is None or worker["status"] != "idle":
        ctx.emit(WorkerStatusChanged(worker_id=wid, status="idle", last_dequeue_time=now, last_idle_time=now))
    else:
        ctx.emit(WorkerStatusChanged(worker_id=wid, status="idle", last_dequeue_time=now,
                                     current_rollout_id=worker["current_rollout_id"],
                                     current_attempt_id=worker["current_attempt_id"]))


def update_worker(ctx: DecisionContext, wid: str, heartbeat_stats: Any = UNSET) -> dict[str, Any]:
    if heartbeat_stats is not UNSET:
        stats = dict(heartbeat_stats)  # None raises TypeError, as upstream's dict(None) does
        orjson.dumps(stats)  # reject what JSON cannot hold before it reaches the log
    ctx.emit(WorkerHeartbeat(worker_id=wid, stats_given=heartbeat_stats is not UNSET,
                             heartbeat_stats_json=None if heartbeat_stats is UNSET else dumps(stats)))
    worker = ctx.worker(wid)
    assert worker is not None
    return worker

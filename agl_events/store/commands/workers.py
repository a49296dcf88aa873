"""Worker decisions: heartbeats, and keeping a worker's status in step with its attempts."""

from __future__ import annotations

from typing import Any

import orjson

from agl_events.events.convert import dumps
from agl_events.store.base import UNSET
from agl_events.store.context import DecisionContext


def sync_worker_with_attempt(ctx: DecisionContext, attempt: dict[str, Any], dequeue: bool = False) -> None:
    """Upstream's worker rule: finished -> idle, timeout/unresponsive -> unknown, anything else -> busy."""
    wid = attempt["worker_id"]
    if not wid:
        return
    now = ctx.now
    fields: dict[str, Any] = {"last_dequeue_time": now if dequeue else None,
                              "last_busy_time": None, "last_idle_time": None}
    if attempt["status"] in ("succeeded", "failed"):
        status, current = "idle", (None, None)
        fields["last_idle_time"] = now
    elif attempt["status"] in ("timeout", "unresponsive"):
        status, current = "unknown", (None, None)
        fields["last_idle_time"] = now
    else:
        status, current = "busy", (attempt["rollout_id"], attempt["attempt_id"])
        fields["last_busy_time"] = now
    ctx.emit("WorkerStatusChanged", wid, worker_id=wid, status=status,
             current_rollout_id=current[0], current_attempt_id=current[1], **fields)


def mark_idle_after_empty_dequeue(ctx: DecisionContext, wid: str) -> None:
    worker = ctx.worker(wid)
    now = ctx.now
    if worker is None or worker["status"] != "idle":
        ctx.emit("WorkerStatusChanged", wid, worker_id=wid, status="idle", last_dequeue_time=now,
                 last_busy_time=None, last_idle_time=now, current_rollout_id=None, current_attempt_id=None)
    else:
        ctx.emit("WorkerStatusChanged", wid, worker_id=wid, status="idle", last_dequeue_time=now,
                 last_busy_time=None, last_idle_time=None, current_rollout_id=worker["current_rollout_id"],
                 current_attempt_id=worker["current_attempt_id"])


def update_worker(ctx: DecisionContext, wid: str, heartbeat_stats: Any = UNSET) -> dict[str, Any]:
    if heartbeat_stats is not UNSET:
        stats = dict(heartbeat_stats)  # None raises TypeError, as upstream's dict(None) does
        orjson.dumps(stats)  # reject what JSON cannot hold before it reaches the log
    ctx.emit("WorkerHeartbeat", wid, worker_id=wid, stats_given=heartbeat_stats is not UNSET,
             heartbeat_stats_json=None if heartbeat_stats is UNSET else dumps(stats))
    worker = ctx.worker(wid)
    assert worker is not None
    return worker

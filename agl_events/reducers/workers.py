"""Folding worker events into worker records (upserts: a worker exists once anything is said of it)."""

from __future__ import annotations

from typing import Any

import orjson

from agl_events.events.typed import WorkerHeartbeat, WorkerStatusChanged
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def _worker(view: Pending, wid: str) -> dict[str, Any]:
    """The worker's record, or a new one. `ordinal` (not a Worker field) is its place in first-seen order,
    how upstream lists workers when no sort_by is given."""
    return view.get(keys.worker(wid)) or {
        "worker_id": wid, "status": "unknown", "heartbeat_stats": None, "last_heartbeat_time": None,
        "last_dequeue_time": None, "last_busy_time": None, "last_idle_time": None,
        "current_rollout_id": None, "current_attempt_id": None, "ordinal": view.get(keys.count("workers")) or 0,
    }


def worker_heartbeat(view: Pending, event: WorkerHeartbeat) -> None:
    worker = {**_worker(view, event.worker_id), "last_heartbeat_time": event.time}
    if event.stats_given:
        stats = event.heartbeat_stats_json
        worker["heartbeat_stats"] = None if stats is None else orjson.loads(stats)
    view.create(keys.worker(event.worker_id), worker, "workers")


def worker_status_changed(view: Pending, event: WorkerStatusChanged) -> None:
    worker = {**_worker(view, event.worker_id), "status": event.status,
              "current_rollout_id": event.current_rollout_id, "current_attempt_id": event.current_attempt_id}
    for field, value in (("last_dequeue_time", event.last_dequeue_time), ("last_busy_time", event.last_busy_time),
                         ("last_idle_time", event.last_idle_time)):
        if value is not None:
            worker[field] = value
    view.create(keys.worker(event.worker_id), worker, "workers")

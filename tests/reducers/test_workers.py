"""Worker events: upserted worker records; a field an event leaves unset keeps its value."""

from __future__ import annotations

import orjson

from agl_events.events.typed import WorkerHeartbeat, WorkerStatusChanged
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from tests.reducers import fold, logged


def heartbeat(wid: str, at: float, stats: dict | None = None, given: bool = True) -> LoggedEvent:
    return logged(WorkerHeartbeat(worker_id=wid, stats_given=given,
                                  heartbeat_stats_json=None if stats is None else orjson.dumps(stats).decode()), at)


def status_changed(wid: str, status: str, rollout: str | None = None, attempt: str | None = None,
                   busy: float | None = None, idle: float | None = None,
                   dequeue: float | None = None) -> LoggedEvent:
    return logged(WorkerStatusChanged(worker_id=wid, status=status, last_dequeue_time=dequeue, last_busy_time=busy,
                                      last_idle_time=idle, current_rollout_id=rollout, current_attempt_id=attempt))


def test_a_first_heartbeat_creates_the_worker_with_its_stats() -> None:
    view = fold([heartbeat("w-1", 3.0, {"cpu": 0.5})])
    assert view[keys.worker("w-1")] == {
        "worker_id": "w-1", "status": "unknown", "heartbeat_stats": {"cpu": 0.5}, "last_heartbeat_time": 3.0,
        "last_dequeue_time": None, "last_busy_time": None, "last_idle_time": None,
        "current_rollout_id": None, "current_attempt_id": None, "ordinal": 0,
    }
    assert view[keys.count("workers")] == 1


def test_heartbeat_stats_change_only_when_given() -> None:
    view = fold([heartbeat("w-1", 1.0, {"cpu": 0.5}), heartbeat("w-1", 2.0, given=False)])
    assert view[keys.worker("w-1")]["heartbeat_stats"] == {"cpu": 0.5}
    assert view[keys.worker("w-1")]["last_heartbeat_time"] == 2.0
    view = fold([heartbeat("w-1", 3.0, None, given=True)], view)
    assert view[keys.worker("w-1")]["heartbeat_stats"] is None


def test_a_status_change_sets_status_and_current_work_and_keeps_unset_times() -> None:
    view = fold([status_changed("w-1", "busy", "ro-a", "at-1", busy=2.0, dequeue=2.0),
                 status_changed("w-1", "idle", idle=3.0)])
    worker = view[keys.worker("w-1")]
    assert worker["status"] == "idle"
    assert (worker["current_rollout_id"], worker["current_attempt_id"]) == (None, None)
    assert (worker["last_busy_time"], worker["last_idle_time"], worker["last_dequeue_time"]) == (2.0, 3.0, 2.0)
    assert worker["last_heartbeat_time"] is None  # a status change is not a heartbeat
    assert view[keys.count("workers")] == 1


def test_status_and_heartbeats_keep_each_others_fields() -> None:
    view = fold([status_changed("w-1", "busy", "ro-a", "at-1", busy=2.0), heartbeat("w-1", 4.0, {"n": 1})])
    worker = view[keys.worker("w-1")]
    assert (worker["status"], worker["current_rollout_id"], worker["last_heartbeat_time"]) == ("busy", "ro-a", 4.0)

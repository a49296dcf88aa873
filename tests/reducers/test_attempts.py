"""Attempt events: attempts by rollout and sequence id, and the index from attempt id to sequence id."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import Attempt, AttemptCreated, AttemptHeartbeat, AttemptStatusChanged, AttemptUpdated
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from tests.reducers import changes_of, fold, logged


def _attempt(rid: str, aid: str, seq: int, **fields: Any) -> Attempt:
    return Attempt.of({"rollout_id": rid, "attempt_id": aid, "sequence_id": seq, "start_time": 1.0,
                           "end_time": None, "status": "preparing", "worker_id": None,
                           "last_heartbeat_time": None, "metadata": None, **fields})


def created(rid: str, aid: str, seq: int) -> LoggedEvent:
    return logged(AttemptCreated(attempt=_attempt(rid, aid, seq)))


def status_changed(rid: str, aid: str, status: str, end_time: float | None = None) -> LoggedEvent:
    return logged(AttemptStatusChanged(rollout_id=rid, attempt_id=aid, status=status, previous_status="preparing",
                                       end_time=end_time))


def heartbeat(rid: str, aid: str, at: float) -> LoggedEvent:
    return logged(AttemptHeartbeat(rollout_id=rid, attempt_id=aid, heartbeat_time=at))


def test_a_created_attempt_is_stored_indexed_and_counted() -> None:
    view = fold([created("ro-a", "at-1", 1)])
    assert view[keys.attempt("ro-a", 1)]["attempt_id"] == "at-1"
    assert view[keys.attempt("ro-a", 1)]["status"] == "preparing"
    assert view[keys.attempt_index("ro-a", "at-1")] == 1
    assert view[keys.count("attempts")] == 1


def test_a_rollouts_attempts_scan_in_sequence_order_and_apart_from_others() -> None:
    view = fold([created("ro-a", "at-2", 2), created("ro-a", "at-10", 10), created("ro-a", "at-1", 1),
                 created("ro-ab", "at-x", 1)])
    scanned = [view[k]["attempt_id"] for k in sorted(view) if k.startswith(keys.attempts_of("ro-a"))]
    assert scanned == ["at-1", "at-2", "at-10"]
    assert view[keys.count("attempts")] == 4


def test_an_update_replaces_the_attempt_without_counting_a_new_one() -> None:
    update = logged(AttemptUpdated(changed=["status", "metadata"],
                                   attempt=_attempt("ro-a", "at-1", 1, status="running", metadata={"k": 1})))
    view = fold([created("ro-a", "at-1", 1), update])
    assert view[keys.attempt("ro-a", 1)]["status"] == "running"
    assert view[keys.attempt("ro-a", 1)]["metadata"] == {"k": 1}
    assert view[keys.count("attempts")] == 1


def test_a_status_change_sets_the_status_and_keeps_the_end_time_unless_given() -> None:
    view = fold([created("ro-a", "at-1", 1), status_changed("ro-a", "at-1", "running")])
    assert view[keys.attempt("ro-a", 1)]["status"] == "running"
    assert view[keys.attempt("ro-a", 1)]["end_time"] is None
    view = fold([status_changed("ro-a", "at-1", "failed", end_time=4.0),
                 status_changed("ro-a", "at-1", "running")], view)
    assert view[keys.attempt("ro-a", 1)]["status"] == "running"
    assert view[keys.attempt("ro-a", 1)]["end_time"] == 4.0


def test_a_heartbeat_sets_only_the_heartbeat_time() -> None:
    before = fold([created("ro-a", "at-1", 1)])
    after = fold([heartbeat("ro-a", "at-1", 3.5)], dict(before))
    assert after[keys.attempt("ro-a", 1)] == {**before[keys.attempt("ro-a", 1)], "last_heartbeat_time": 3.5}


def test_changes_to_an_attempt_the_view_lacks_change_nothing() -> None:
    view = fold([created("ro-a", "at-1", 1)])
    assert changes_of(view, status_changed("ro-a", "at-2", "running")) == {}
    assert changes_of(view, heartbeat("ro-b", "at-1", 2.0)) == {}

"""Events naming a rollout or attempt the view does not hold change nothing and say why (the live store
dead-letters them); the same events for what exists apply, with no reason given."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import AttemptHeartbeat, AttemptStatusChanged, RolloutStatusChanged
from agl_events.log.records import LoggedEvent
from agl_events.reducers import Pending, keys, reduce_explained
from tests.reducers import logged


def _status(rid: str) -> LoggedEvent:
    return logged(RolloutStatusChanged(rollout_id=rid, status="cancelled", previous_status="queuing", end_time=5.0,
                                       cause="test"))


def _attempt_status(rid: str, aid: str) -> LoggedEvent:
    return logged(AttemptStatusChanged(rollout_id=rid, attempt_id=aid, status="failed", previous_status="running",
                                       end_time=5.0))


def _reduced(view: dict[str, Any], event: LoggedEvent) -> Pending:
    return reduce_explained(view.get, event.kind, event.record)


def test_a_status_change_or_heartbeat_for_nothing_is_ignored_with_its_reason() -> None:
    empty: dict[str, Any] = {}
    rollout = _reduced(empty, _status("ro-x"))
    assert rollout.changes == {} and rollout.ignored is not None and "no rollout ro-x" in rollout.ignored
    attempt = _reduced(empty, _attempt_status("ro-x", "at-1"))
    assert attempt.changes == {} and "no attempt at-1 of rollout ro-x" in (attempt.ignored or "")
    beat = _reduced(empty, logged(AttemptHeartbeat(rollout_id="ro-x", attempt_id="at-1", heartbeat_time=3.0)))
    assert beat.changes == {} and "heartbeat" in (beat.ignored or "")


def test_the_same_events_for_what_exists_apply_and_are_not_ignored() -> None:
    view: dict[str, Any] = {keys.rollout("ro-x"): {"rollout_id": "ro-x", "status": "queuing", "end_time": None},
                            keys.attempt_index("ro-x", "at-1"): 1,
                            keys.attempt("ro-x", 1): {"attempt_id": "at-1", "status": "running", "end_time": None}}
    rollout = _reduced(view, _status("ro-x"))
    assert rollout.ignored is None and rollout.changes[keys.rollout("ro-x")]["status"] == "cancelled"
    attempt = _reduced(view, _attempt_status("ro-x", "at-1"))
    assert attempt.ignored is None and attempt.changes[keys.attempt("ro-x", 1)]["status"] == "failed"

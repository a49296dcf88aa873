"""Rollout events: the rollout records, the FIFO queue and the active index the watchdog scans."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import Rollout, RolloutEnqueued, RolloutStarted, RolloutStatusChanged, RolloutUpdated
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.types import RolloutConfig
from tests.reducers import View, changes_of, fold, logged


def _rollout(rid: str, status: str = "queuing", **fields: Any) -> Rollout:
    return Rollout.of({"rollout_id": rid, "input": {"task": rid}, "start_time": 1.0, "end_time": None,
                           "mode": None, "resources_id": None, "status": status,
                           "config": RolloutConfig().model_dump(), "metadata": {}, **fields})


def enqueued(rid: str, queue_seq: int) -> LoggedEvent:
    return logged(RolloutEnqueued(rollout=_rollout(rid), queue_seq=queue_seq))


def status_changed(rid: str, status: str, queue_seq: int | None = None, end_time: float | None = None) -> LoggedEvent:
    return logged(RolloutStatusChanged(rollout_id=rid, status=status, previous_status="queuing", end_time=end_time,
                                       queue_seq=queue_seq, cause="test"))


def updated(rid: str, status: str, queue_seq: int | None = None, **fields: Any) -> LoggedEvent:
    return logged(RolloutUpdated(rollout=_rollout(rid, status, **fields), changed=["status"], queue_seq=queue_seq))


def queue(view: View) -> list[str]:
    return [view[key] for key in sorted(view) if key.startswith(keys.QUEUE)]


def test_an_enqueued_rollout_is_stored_counted_and_queued() -> None:
    view = fold([enqueued("ro-a", 7)])
    assert view[keys.rollout("ro-a")]["status"] == "queuing"
    assert view[keys.rollout("ro-a")]["input"] == {"task": "ro-a"}
    assert view[keys.queue_entry(7)] == "ro-a" and view[keys.queued("ro-a")] == 7
    assert view[keys.QUEUE_SEQ] == 7
    assert view[keys.count("rollouts")] == 1
    assert keys.active("ro-a") not in view


def test_the_queue_sorts_by_queue_position_whatever_the_fold_order() -> None:
    view = fold([enqueued("ro-a", 10), enqueued("ro-b", 9), enqueued("ro-c", 100)])
    assert queue(view) == ["ro-b", "ro-a", "ro-c"]
    assert view[keys.QUEUE_SEQ] == 100  # the highest position handed out, not the last folded
    assert view[keys.count("rollouts")] == 3


def test_a_started_rollout_is_active_and_never_queued() -> None:
    view = fold([logged(RolloutStarted(rollout=_rollout("ro-a", "preparing")))])
    assert view[keys.rollout("ro-a")]["status"] == "preparing"
    assert view[keys.active("ro-a")] == 1
    assert queue(view) == [] and keys.queued("ro-a") not in view


def test_dequeuing_moves_a_rollout_from_the_queue_to_the_active_index() -> None:
    view = fold([enqueued("ro-a", 1), enqueued("ro-b", 2), status_changed("ro-a", "preparing")])
    assert view[keys.rollout("ro-a")]["status"] == "preparing"
    assert view[keys.active("ro-a")] == 1
    assert queue(view) == ["ro-b"] and keys.queued("ro-a") not in view
    assert view[keys.QUEUE_SEQ] == 2


def test_finishing_stamps_the_end_time_and_leaves_the_active_index() -> None:
    view = fold([enqueued("ro-a", 1), status_changed("ro-a", "running"),
                 status_changed("ro-a", "succeeded", end_time=5.0)])
    rollout = view[keys.rollout("ro-a")]
    assert (rollout["status"], rollout["end_time"], rollout["input"]) == ("succeeded", 5.0, {"task": "ro-a"})
    assert keys.active("ro-a") not in view


def test_a_status_change_without_an_end_time_keeps_the_recorded_one() -> None:
    view = fold([enqueued("ro-a", 1), status_changed("ro-a", "failed", end_time=5.0),
                 status_changed("ro-a", "requeuing", queue_seq=2)])
    assert view[keys.rollout("ro-a")]["end_time"] == 5.0


def test_a_retry_goes_to_the_back_of_the_queue() -> None:
    view = fold([enqueued("ro-a", 1), enqueued("ro-b", 2), status_changed("ro-a", "preparing"),
                 status_changed("ro-a", "requeuing", queue_seq=3)])
    assert queue(view) == ["ro-b", "ro-a"]
    assert view[keys.queued("ro-a")] == 3 and keys.active("ro-a") not in view


def test_an_update_that_stays_queuing_keeps_the_queue_position() -> None:
    view = fold([enqueued("ro-a", 1), enqueued("ro-b", 2), updated("ro-a", "requeuing", metadata={"k": 1})])
    assert queue(view) == ["ro-a", "ro-b"] and view[keys.queued("ro-a")] == 1
    assert view[keys.rollout("ro-a")]["metadata"] == {"k": 1}
    assert view[keys.count("rollouts")] == 2  # an update is not a new rollout


def test_an_update_out_of_the_queue_dequeues_and_one_back_in_requeues() -> None:
    view = fold([enqueued("ro-a", 1), updated("ro-a", "cancelled")])
    assert queue(view) == [] and keys.queued("ro-a") not in view
    view = fold([updated("ro-a", "queuing", queue_seq=4)], view)
    assert queue(view) == ["ro-a"] and view[keys.queued("ro-a")] == 4


def test_a_status_change_of_a_rollout_the_view_lacks_changes_nothing() -> None:
    """Its creation may be gone from the log (retention); the change must not invent a partial rollout."""
    assert changes_of({}, status_changed("ro-gone", "preparing")) == {}

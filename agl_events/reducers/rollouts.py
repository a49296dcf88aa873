"""Folding rollout events: the rollout records and the global FIFO queue."""

from __future__ import annotations

from agl_events.events.typed import RolloutEnqueued, RolloutStarted, RolloutStatusChanged, RolloutUpdated
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending
from agl_events.types import QUEUING_STATUSES, RUNNING_STATUSES

#: The rollout metadata field that holds the idempotency key of the task request it was ingested from.
TASK_KEY = "task_key"


def _sync_queue(view: Pending, rid: str, status: str, queue_seq: int | None) -> None:
    """The queue holds exactly the rollouts that are queuing or requeuing, in the order they entered it.

    The active index holds exactly the preparing and running ones, which the watchdog scans.
    """
    if status in RUNNING_STATUSES:
        view.put(keys.active(rid), 1)
    elif view.get(keys.active(rid)) is not None:
        view.delete(keys.active(rid))
    current = view.get(keys.queued(rid))
    if status not in QUEUING_STATUSES:
        if current is not None:
            view.delete(keys.queue_entry(current))
            view.delete(keys.queued(rid))
        return
    if queue_seq is not None and current is None:
        view.put(keys.queue_entry(queue_seq), rid)
        view.put(keys.queued(rid), queue_seq)
        view.chmax(keys.QUEUE_SEQ, queue_seq)


def rollout_enqueued(view: Pending, event: RolloutEnqueued) -> None:
    rollout = event.rollout.to_model()
    rid = event.rollout.rollout_id
    view.create(keys.rollout(rid), rollout, "rollouts")
    _sync_queue(view, rid, event.rollout.status, event.queue_seq)
    task_key = (rollout["metadata"] or {}).get(TASK_KEY)
    if isinstance(task_key, str):  # an ingested task request: its key -> this rollout (set, so replay-safe)
        view.put(keys.task_key(task_key), rid)


def rollout_started(view: Pending, event: RolloutStarted) -> None:
    rid = event.rollout.rollout_id
    view.create(keys.rollout(rid), event.rollout.to_model(), "rollouts")
    _sync_queue(view, rid, event.rollout.status, None)


def rollout_updated(view: Pending, event: RolloutUpdated) -> None:
    rid = event.rollout.rollout_id
    view.create(keys.rollout(rid), event.rollout.to_model(), "rollouts")
    _sync_queue(view, rid, event.rollout.status, event.queue_seq)


def rollout_status_changed(view: Pending, event: RolloutStatusChanged) -> None:
    rid = event.rollout_id
    rollout = view.get(keys.rollout(rid))
    if rollout is None:
        view.ignore(f"no rollout {rid}: a status change ({event.status}) for a rollout never enqueued")
        return
    changed = {**rollout, "status": event.status}
    if event.end_time is not None:
        changed["end_time"] = event.end_time
    view.put(keys.rollout(rid), changed)
    _sync_queue(view, rid, event.status, event.queue_seq)

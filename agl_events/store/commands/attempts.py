"""Attempt decisions: creating attempts, updating them, propagating to the rollout, and the watchdog."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import Attempt as AttemptRecord
from agl_events.events.typed import AttemptCreated, AttemptUpdated, RolloutStatusChanged
from agl_events.reducers import keys
from agl_events.store.commands.dispatch import dispatch
from agl_events.store.commands.finished import announce_finished
from agl_events.store.commands.workers import sync_worker_with_attempt
from agl_events.store.context import DecisionContext
from agl_events.store.ids import new_attempt_id
from agl_events.types import FINISHED_STATUSES, QUEUING_STATUSES, RUNNING_STATUSES, UNSET, Attempt


def rollout_status_from_attempt(attempt: dict[str, Any], config: dict[str, Any]) -> str:
    """Upstream's rule: a failed try becomes requeuing while retries remain and the condition matches."""
    status = attempt["status"]
    if status in ("preparing", "running", "succeeded"):
        return status
    if status in config["retry_condition"] and attempt["sequence_id"] < config["max_attempts"]:
        return "requeuing"
    return "failed"


def set_rollout_status(ctx: DecisionContext, rid: str, status: str, cause: str) -> None:
    """Change a rollout's status: terminal states stamp end_time; queuing states re-enter the queue."""
    rollout = ctx.rollout(rid)
    assert rollout is not None
    queue_seq = ctx.next_queue_seq(rid) if status in QUEUING_STATUSES and ctx.get(keys.queued(rid)) is None else None
    ctx.emit(RolloutStatusChanged(rollout_id=rid, status=status, previous_status=rollout["status"],
                                  end_time=ctx.now if status in FINISHED_STATUSES else None, queue_seq=queue_seq,
                                  cause=cause))
    announce_finished(ctx, rid, rollout["status"])
    if queue_seq is not None:
        dispatch(ctx, rollout, queue_seq)


def create_attempt(ctx: DecisionContext, rid: str, worker_id: str | None, running: bool = False) -> dict[str, Any]:
    """Attempt k+1, preparing; or already `running` (with a heartbeat now) when its runner starts it at once."""
    attempt = {
        "rollout_id": rid, "attempt_id": new_attempt_id(), "sequence_id": len(ctx.attempts(rid)) + 1,
        "start_time": ctx.now, "end_time": None, "status": "running" if running else "preparing",
        "worker_id": worker_id, "last_heartbeat_time": ctx.now if running else None, "metadata": None,
    }
    ctx.emit(AttemptCreated(attempt=AttemptRecord.of(attempt)))
    return attempt


def update_attempt(ctx: DecisionContext, rid: str, aid: str, status: Any = UNSET, worker_id: Any = UNSET,
                   last_heartbeat_time: Any = UNSET, metadata: Any = UNSET, cause: str = "attempt"
                   ) -> dict[str, Any]:
    rollout = ctx.rollout(rid)
    if rollout is None:
        raise ValueError(f"Rollout {rid} not found")
    latest = ctx.latest_attempt(rid)
    if latest is None:
        raise ValueError(f"No attempts found for rollout {rid}")
    attempt = latest if aid == "latest" else ctx.attempt(rid, aid)
    if attempt is None:
        raise ValueError(f"Attempt {aid} not found for rollout {rid}")
    attempt = dict(attempt)
    changed: list[str] = []
    sync_worker = False
    if worker_id is not UNSET:
        attempt["worker_id"] = worker_id
        changed.append("worker_id")
        sync_worker = bool(worker_id)
    if status is not UNSET:
        attempt["status"] = status
        changed.append("status")
        if status in ("failed", "succeeded"):
            attempt["end_time"] = ctx.now
            changed.append("end_time")
        sync_worker = sync_worker or bool(attempt["worker_id"])
    if last_heartbeat_time is not UNSET:
        attempt["last_heartbeat_time"] = last_heartbeat_time
        changed.append("last_heartbeat_time")
    if metadata is not UNSET:
        attempt["metadata"] = metadata
        changed.append("metadata")
    attempt = Attempt.model_validate(attempt).model_dump()
    ctx.emit(AttemptUpdated(attempt=AttemptRecord.of(attempt), changed=changed))
    if attempt["attempt_id"] == latest["attempt_id"]:
        derived = rollout_status_from_attempt(attempt, rollout["config"])
        if derived != rollout["status"]:
            set_rollout_status(ctx, rid, derived, cause)
    if sync_worker:
        sync_worker_with_attempt(ctx, attempt)
    return attempt


def unhealthy_verdict(attempt: dict[str, Any], config: dict[str, Any], now: float) -> str | None:
    """Upstream's watchdog rule, evaluated on the store's clock."""
    timeout, unresponsive = config["timeout_seconds"], config["unresponsive_seconds"]
    if timeout is not None and now - attempt["start_time"] > timeout:
        return "timeout"
    if unresponsive is not None:
        since = attempt["last_heartbeat_time"] if attempt["last_heartbeat_time"] is not None else attempt["start_time"]
        if now - since > unresponsive:
            return "unresponsive"
    return None


def scan_unhealthy(ctx: DecisionContext, rollouts: list[dict[str, Any]]) -> int:
    """Mark the latest attempt of each running rollout that timed out or went silent; returns how many."""
    marked = 0
    for rollout in rollouts:
        if rollout["status"] not in RUNNING_STATUSES:
            continue
        config = rollout["config"]
        if config["timeout_seconds"] is None and config["unresponsive_seconds"] is None:
            continue
        attempt = ctx.latest_attempt(rollout["rollout_id"])
        if attempt is None:
            marked += _restart_attemptless(ctx, rollout)
            continue
        if attempt["status"] in ("timeout", "unresponsive", "failed", "succeeded"):
            continue
        verdict = unhealthy_verdict(attempt, config, ctx.now)
        if verdict is not None:
            update_attempt(ctx, rollout["rollout_id"], attempt["attempt_id"], status=verdict, cause="watchdog")
            marked += 1
    return marked


def _restart_attemptless(ctx: DecisionContext, rollout: dict[str, Any]) -> int:
    """A running rollout with no attempt at all: a claim whose rollout event reached the log but whose
    AttemptCreated did not (the store died between the appends of one decision), or a status set by hand. No
    runner holds an attempt of it, so nothing would ever end it: once it has been silent for
    `unresponsive_seconds` since it was enqueued, it is queued again when unresponsive attempts are retried,
    else it fails, as an attempt that never sent a heartbeat would."""
    config = rollout["config"]
    if config["unresponsive_seconds"] is None or ctx.now - rollout["start_time"] <= config["unresponsive_seconds"]:
        return 0
    retried = "unresponsive" in config["retry_condition"] and config["max_attempts"] >= 1
    set_rollout_status(ctx, rollout["rollout_id"], "requeuing" if retried else "failed", cause="watchdog")
    return 1

"""Announcing a rollout that entered the queue on the tasks topic, for runners to claim (see `tasks`)."""

from __future__ import annotations

from typing import Any

from agl_events.events.convert import dumps
from agl_events.store.context import DecisionContext


def dispatch(ctx: DecisionContext, rollout: dict[str, Any], queue_seq: int) -> None:
    ctx.emit("TaskDispatched", rollout["rollout_id"], rollout_id=rollout["rollout_id"], attempt_id=None,
             attempt_sequence_id=None, worker_id=None, resources_id=rollout["resources_id"], mode=rollout["mode"],
             input_json=dumps(rollout["input"]), queue_seq=queue_seq)

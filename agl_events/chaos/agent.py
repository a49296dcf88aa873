"""The chaos run's agent: a fixed number of traced steps and a reward, so every finished attempt has a known
set of spans. Module level, so spawned runner processes import it."""

from __future__ import annotations

import time
from typing import Any

from agl_events.agent import rollout
from agl_events.emitter import operation

#: Spans of a finished attempt: `STEPS` operations and the reward span the returned float becomes.
STEPS = 3
SPANS_PER_ATTEMPT = STEPS + 1


@rollout
def chaos_agent(task: dict[str, Any]) -> float:
    """`STEPS` operations of `task["step_seconds"]` each (long enough for kills to land mid-rollout)."""
    for step in range(STEPS):
        with operation(step=step, task=task["i"]):
            time.sleep(float(task["step_seconds"]))
    return 1.0

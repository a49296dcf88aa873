"""Agents for the runner tests, at module level so spawned runner processes can import them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from agl_events import LitAgent, emit_reward, operation, rollout

SPANS_PER_ROLLOUT = 3  # two operations and one reward


@rollout
def counting_agent(task: dict[str, Any]) -> None:
    """Two traced steps and a reward from the task, so every rollout has a known set of spans."""
    with operation(step="think"):
        pass
    with operation(step="act"):
        pass
    emit_reward(float(task["i"]) / 1000.0)


class HangOnFirstAttempt(LitAgent[Any]):
    """Hangs silently on a rollout's first attempt (a runner to be killed), succeeds on later ones."""

    def rollout(self, task: Any, resources: Any, rollout: Any) -> float:
        if task.get("hang") and rollout.attempt.sequence_id == 1:
            time.sleep(600)
        return 1.0


class SlowOrFast(LitAgent[Any]):
    """Sleeps when told to, so tests can show a slow rollout does not hold others back. With `started` (a path)
    it first creates that file: the test knows the agent runs, so its runner has the claim's answer."""

    def rollout(self, task: Any, resources: Any, rollout: Any) -> float:
        if "started" in task:
            Path(task["started"]).touch()
        time.sleep(float(task.get("sleep", 0)))
        return 0.5


@rollout
async def waiting_agent(task: dict[str, Any]) -> None:
    """An async agent that waits (as on an LLM) inside a traced step: runners with slots overlap them."""
    with operation(step="wait"):
        await asyncio.sleep(float(task.get("sleep", 0.2)))
    emit_reward(float(task["i"]) / 1000.0)

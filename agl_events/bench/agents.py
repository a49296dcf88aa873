"""Agents used by the benchmarks (module level, so runner processes can import them)."""

from __future__ import annotations

from typing import Any

from agl_events.agent import rollout
from agl_events.emitter import emit_reward, operation


@rollout
def span_burst(task: dict[str, Any]) -> None:
    """`spans` nested operations as fast as the tracer takes them, then a reward."""
    for i in range(int(task.get("spans", 10))):
        with operation(step=i):
            pass
    emit_reward(1.0)

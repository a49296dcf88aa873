"""Agents: `LitAgent` to subclass, `@rollout` to turn a function into one."""

from agl_events.agent.decorator import (
    AsyncFunctionalLitAgent,
    FunctionalLitAgent,
    llm_rollout,
    prompt_rollout,
    rollout,
)
from agl_events.agent.litagent import LitAgent, RolloutRawResult

__all__ = [
    "AsyncFunctionalLitAgent",
    "FunctionalLitAgent",
    "LitAgent",
    "RolloutRawResult",
    "llm_rollout",
    "prompt_rollout",
    "rollout",
]

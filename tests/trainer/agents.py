"""Agents for the trainer tests, at module level so spawned runner processes can import them."""

from __future__ import annotations

import threading
from typing import Any

from agl_events import rollout
from agl_events.types import PromptTemplate


@rollout
def template_echo(task: dict[str, Any], prompt_template: PromptTemplate) -> float:
    """Rewarded with the version number its prompt template names: which resources a runner used is visible."""
    return float(prompt_template.format(**task))


#: Rollouts of `meet` wait here for one another: only a runner running three at once gets them all through.
MEETING = threading.Barrier(3)


@rollout
def meet(task: dict[str, Any]) -> float:
    """Succeeds once three rollouts run at once in this (runner) process; fails when they cannot (a broken or
    timed-out barrier), so a runner that runs one rollout at a time fails them all."""
    MEETING.wait(timeout=15)
    return 1.0

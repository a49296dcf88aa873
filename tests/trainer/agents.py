"""Agents for the trainer tests, at module level so spawned runner processes can import them."""

from __future__ import annotations

from typing import Any

from agl_events import rollout
from agl_events.types import PromptTemplate


@rollout
def template_echo(task: dict[str, Any], prompt_template: PromptTemplate) -> float:
    """Rewarded with the version number its prompt template names: which resources a runner used is visible."""
    return float(prompt_template.format(**task))

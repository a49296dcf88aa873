"""Prompt optimization decisions: recording a step of an APO run (nothing to check: the algorithm decided)."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import PromptCandidateRecorded
from agl_events.store.context import DecisionContext


def record_prompt_candidate(ctx: DecisionContext, step: dict[str, Any]) -> None:
    """`step`: a `PromptCandidateStep` dump, whose fields are the event's."""
    ctx.emit(PromptCandidateRecorded(**step))

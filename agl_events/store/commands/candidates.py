"""Prompt optimization decisions: recording a step of an APO run (nothing to check: the algorithm decided)."""

from __future__ import annotations

from typing import Any

from agl_events.store.context import DecisionContext


def step_key(step: dict[str, Any]) -> str:
    """One key per step: the resources topic is compacted, so a key shared with the candidate's resources
    snapshot (or with another step) would let compaction drop the older record."""
    return "/".join(("apo", step["run_id"], step["candidate_id"], step["stage"], str(step["round"]),
                     step.get("scope") or ""))


def record_prompt_candidate(ctx: DecisionContext, step: dict[str, Any]) -> None:
    ctx.emit("PromptCandidateRecorded", step_key(step), **step)

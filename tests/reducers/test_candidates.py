"""Prompt optimization steps: one entry per candidate, scores set by round and scope, idempotent."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import PromptCandidateRecorded
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from tests.reducers import fold, logged


def step(stage: str, candidate: str, time: float, **fields: Any) -> LoggedEvent:
    return logged(PromptCandidateRecorded(run_id="run-1", candidate_id=candidate, stage=stage,
                                          **{"round": 1, **fields}), time)


def test_a_proposed_candidate_gathers_its_scores_by_round_and_scope() -> None:
    events = [step("proposed", "rs-b", 1.0, parent_id="rs-a", template="Be exact.", critique="- too vague"),
              step("scored", "rs-b", 2.0, scope="batch", score=0.5, rollout_ids=["ro-1", "ro-2"]),
              step("scored", "rs-b", 3.0, scope="full", score=0.75, rollout_ids=["ro-3"])]
    entry = fold(events)[keys.prompt_candidate("run-1", "rs-b")]
    assert (entry["status"], entry["parent_id"], entry["template"], entry["critique"]) == (
        "proposed", "rs-a", "Be exact.", "- too vague")
    assert {k: (v["score"], v["rollout_ids"]) for k, v in entry["scores"].items()} == {
        "1/batch": (0.5, ["ro-1", "ro-2"]), "1/full": (0.75, ["ro-3"])}


def test_applying_a_step_twice_leaves_the_entry_as_once_and_a_failed_edit_keeps_its_reason() -> None:
    score = step("scored", "rs-b", 2.0, scope="batch", score=0.5)
    once = fold([step("proposed", "rs-b", 1.0, template="t"), score])
    assert fold([step("proposed", "rs-b", 1.0, template="t"), score, score]) == once
    failed = fold([step("failed", "edit-1", 1.0, parent_id="rs-a", reason="empty answer")])
    assert failed[keys.prompt_candidate("run-1", "edit-1")]["reason"] == "empty answer"

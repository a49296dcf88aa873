"""APO steps through the store: recorded durably, folded per candidate, queried per run (both backends)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agl_events.events.typed import PromptCandidateRecorded
from agl_events.types import PromptCandidateStep


async def test_steps_are_queried_per_run_in_proposal_order_with_their_scores(store, clock):
    for run, candidate, parent in [("run-1", "rs-a", None), ("run-2", "rs-x", None), ("run-1", "rs-b", "rs-a")]:
        clock.advance(1.0)
        await store.record_prompt_candidate(PromptCandidateStep(
            run_id=run, candidate_id=candidate, stage="proposed", round=0 if parent is None else 1,
            parent_id=parent, template=f"prompt {candidate}"))
    await store.record_prompt_candidate(PromptCandidateStep(run_id="run-1", candidate_id="rs-b", stage="scored",
                                                            round=1, scope="batch", score=0.25,
                                                            rollout_ids=["ro-1"]))
    found = await store.query_prompt_candidates("run-1")
    assert [(c.candidate_id, c.parent_id, c.template) for c in found] == [
        ("rs-a", None, "prompt rs-a"), ("rs-b", "rs-a", "prompt rs-b")]
    assert [(s.round, s.scope, s.score, s.rollout_ids) for s in found[1].scores] == [(1, "batch", 0.25, ["ro-1"])]
    assert len(await store.query_prompt_candidates()) == 3


def test_a_step_must_say_what_stage_it_is() -> None:
    with pytest.raises(ValidationError):
        PromptCandidateStep(run_id="r", candidate_id="c", stage="edited", round=0)  # type: ignore[arg-type]


def test_each_step_has_a_key_of_its_own_on_the_compacted_resources_topic() -> None:
    steps = [PromptCandidateStep(run_id="r", candidate_id="rs-a", stage="proposed", round=1),
             PromptCandidateStep(run_id="r", candidate_id="rs-a", stage="scored", round=1, scope="batch"),
             PromptCandidateStep(run_id="r", candidate_id="rs-a", stage="scored", round=1, scope="full"),
             PromptCandidateStep(run_id="r", candidate_id="rs-a", stage="scored", round=2, scope="batch")]
    keys = [PromptCandidateRecorded(**s.model_dump()).key for s in steps]
    assert len(set(keys)) == 4 and "rs-a" not in keys  # never the candidate's resources id itself

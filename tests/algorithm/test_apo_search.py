"""APO's loop with a fake model client and a fake evaluator (no Kafka): what it proposes, keeps, records,
and how it lives with edits that fail. A prompt scores by the hints it holds, so a better one exists."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from agl_events.algorithm.apo.algorithm import APO, Scored
from agl_events.algorithm.apo.beam import Candidate
from agl_events.algorithm.apo.editor import EditFailed, PromptEditor, usable_edit
from agl_events.types import PromptCandidateStep, PromptTemplate

HINTS = ("Think step by step.", "Answer with a number only.", "Check the units.")
SEED = PromptTemplate(template="Solve: {question}", engine="f-string")


def _answer(text: str) -> SimpleNamespace:
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text))])


class ScriptedModel:
    """Critiques name the first hint a template lacks; edits add the hint a critique names."""

    def __init__(self, broken_edits: int = 0, unreachable: bool = False) -> None:
        self.broken_edits, self.unreachable, self.calls = broken_edits, unreachable, 0
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    async def create(self, *, model: str, messages: list[dict[str, str]], temperature: float) -> Any:
        self.calls += 1
        if self.unreachable:
            raise ConnectionError("connection refused")
        prompt = messages[0]["content"]
        template = re.search(r"<template>\n(.*?)\n</template>", prompt, re.DOTALL).group(1)  # type: ignore[union-attr]
        if model == "critic":
            missing = [h for h in HINTS if h not in template]
            return _answer(f"- add: {missing[0]}" if missing else "- nothing to add")
        if self.broken_edits:
            self.broken_edits -= 1
            return _answer("I cannot help with that {oops}")  # a placeholder the agent does not fill
        hint = prompt.split("- add: ")[1].split("\n")[0] if "- add: " in prompt else "Be brief."
        return _answer(f"```\n{template} {hint}\n```")


class FakeEvaluator:
    """Versions numbered in order; a prompt scores the share of hints it holds; in-flight runs counted."""

    def __init__(self) -> None:
        self.steps: list[PromptCandidateStep] = []
        self.published: list[str] = []
        self.in_flight = self.most_in_flight = 0

    async def publish(self, candidate: Candidate) -> str:
        self.published.append(candidate.template)
        return f"rs-{len(self.published)}"

    async def evaluate(self, candidate: Candidate, tasks: Sequence[Any], mode: str) -> Scored:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        score = sum(h in candidate.template for h in HINTS) / len(HINTS)
        return Scored(score, [f"ro-{candidate.id}-{t}" for t in tasks],
                      [{"status": "succeeded", "final_reward": score, "messages": []} for _ in tasks])

    async def record(self, step: PromptCandidateStep) -> None:
        self.steps.append(step)


def _apo(model: ScriptedModel, **options: Any) -> APO:
    apo = APO(model, gradient_model="critic", apply_edit_model="editor", beam_width=2, branch_factor=2,
              beam_rounds=3, gradient_batch_size=2, val_batch_size=2, seed=0, retries=0, **options)
    apo.run_id = "run-test"
    return apo


async def test_the_search_finds_the_better_prompt_keeps_the_best_and_records_every_step() -> None:
    evaluator = FakeEvaluator()
    result = await _apo(ScriptedModel()).optimize(SEED, list(range(6)), list(range(4)), evaluator)
    assert result.score == 1.0 and all(h in result.prompt.template for h in HINTS)  # type: ignore[union-attr]
    assert result.prompt.template.startswith("Solve: {question}")  # type: ignore[union-attr]
    proposed = [s for s in evaluator.steps if s.stage == "proposed"]
    assert len(proposed) == result.candidates == 1 + 3 * 2 * 2 and result.failed_edits == 0
    assert proposed[0].parent_id is None and proposed[0].template == SEED.template
    ids = {s.candidate_id for s in proposed}
    assert all(s.parent_id in ids and s.critique.startswith("- ") for s in proposed[1:])  # type: ignore[union-attr]
    full = [s for s in evaluator.steps if s.stage == "scored" and s.scope == "full"]
    assert [s.round for s in full] == [0, 1, 2, 3] and full[0].score == 0.0  # the seed, then each leader
    assert result.resources_id in ids and len(result.rollouts) == 0  # a fake evaluator runs no rollouts


async def test_failed_edits_are_counted_recorded_with_their_reason_and_skipped() -> None:
    evaluator = FakeEvaluator()
    result = await _apo(ScriptedModel(broken_edits=3)).optimize(SEED, list(range(6)), list(range(4)), evaluator)
    failed = [s for s in evaluator.steps if s.stage == "failed"]
    assert result.failed_edits == len(failed) == 3
    assert all("placeholders" in (s.reason or "") and s.parent_id for s in failed)
    assert result.candidates == 1 + 3 * 2 * 2 - 3 and result.score > 0.0  # the run went on and improved


async def test_an_unreachable_model_fails_every_edit_and_leaves_the_seed_the_best() -> None:
    evaluator, model = FakeEvaluator(), ScriptedModel(unreachable=True)
    result = await _apo(model).optimize(SEED, list(range(4)), list(range(2)), evaluator)
    assert result.prompt == SEED and result.failed_edits == 3 * 2 * 2 and result.candidates == 1
    assert all("connection refused" in (s.reason or "") for s in evaluator.steps if s.stage == "failed")


async def test_candidates_are_scored_concurrently_unless_asked_to_go_one_by_one() -> None:
    together, one_by_one = FakeEvaluator(), FakeEvaluator()
    await _apo(ScriptedModel()).optimize(SEED, list(range(6)), list(range(4)), together)
    await _apo(ScriptedModel(), concurrent=False).optimize(SEED, list(range(6)), list(range(4)), one_by_one)
    assert together.most_in_flight > 1 and one_by_one.most_in_flight == 1


async def test_a_model_call_is_retried_with_a_growing_wait_then_fails_with_the_reason() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    model = ScriptedModel(unreachable=True)
    editor = PromptEditor(model, gradient_model="critic", apply_edit_model="editor", temperature=1.0,
                          rng=random.Random(0), retries=2, backoff=0.5, sleep=sleep)
    with pytest.raises(EditFailed, match=r"critic failed after 3 tries: ConnectionError: connection refused"):
        await editor.critique("Solve: {question}", [])
    assert waits == [0.5, 1.0] and model.calls == 3


def test_an_edit_must_be_a_changed_template_with_the_same_placeholders() -> None:
    assert usable_edit("```text\nSolve {question} carefully.\n```", "Solve {question}") == "Solve {question} carefully."
    for answer, reason in [("", "nothing"), ("Solve {question}", "unchanged"), ("Solve it", r"lost \{question\}"),
                           ("Solve {question} for {user}", r"added \{user\}"), ("Solve {question", "no f-string")]:
        with pytest.raises(EditFailed, match=reason):
            usable_edit(answer, "Solve {question}")

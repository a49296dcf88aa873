"""APO: automatic prompt optimization (textual gradients, beam search), as Agent Lightning 0.3.0 runs it,
through the log.

The loop is upstream's: score the seed prompt (the first `PromptTemplate` of the latest resources) on the
validation set; each round, sample `beam_width` parents from the beam; for each parent, `branch_factor`
times: run it on a training batch, ask the gradient model for a critique of those rollouts (status, final
reward, messages from `TraceToMessages`), ask the edit model to apply it; score beam and candidates on a
validation batch and keep the best `beam_width`; score the leader on the whole validation set; keep the
best prompt ever seen, and publish it as the latest resources at the end.

What differs: each candidate is a resources version (its rollouts run on the runners against it) and each
step is a `PromptCandidateRecorded` event (proposed with parent and critique, scored with its rollouts,
failed with the reason), so a run can be audited and replayed (`agl-events apo history`). The edits of a
round and the scoring of its candidates run concurrently (upstream: one after another). An edit that fails
(the endpoint down after retries, an answer that is no template) is recorded, counted and skipped.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agl_events.adapter.messages import TraceToMessages
from agl_events.algorithm.apo.beam import BestSoFar, Candidate, batches, sample_parents, select_beam
from agl_events.algorithm.apo.editor import EditFailed, PromptEditor
from agl_events.algorithm.base import AlgorithmContext, SplitResult
from agl_events.types import PromptCandidateStep, PromptTemplate

log = logging.getLogger(__name__)


@dataclass
class Scored:
    """A candidate's rollouts on a batch: what the critique reads (`experiments`) and their mean reward."""

    score: float
    rollout_ids: list[str]
    experiments: list[dict[str, Any]]
    split: SplitResult | None = None


class Evaluator(Protocol):
    """Where candidates live and run: the log and the runners (`StoreEvaluator`), or a test's fake."""

    async def publish(self, candidate: Candidate) -> str: ...

    async def evaluate(self, candidate: Candidate, tasks: Sequence[Any], mode: str) -> Scored: ...

    async def record(self, step: PromptCandidateStep) -> None: ...


@dataclass
class APOResult(SplitResult):
    """The best prompt's last full validation run, with the prompt, its score and its resources version."""

    prompt: PromptTemplate | None = None
    score: float = float("-inf")
    resources_id: str | None = None
    failed_edits: int = 0
    candidates: int = 0


class APO:
    """Beam search over prompt templates; constructor and defaults as upstream's `agl.APO`."""

    def __init__(self, async_openai_client: Any, *, gradient_model: str = "gpt-5-mini",
                 apply_edit_model: str = "gpt-4.1-mini", diversity_temperature: float = 1.0,
                 gradient_batch_size: int = 4, val_batch_size: int = 16, beam_width: int = 4,
                 branch_factor: int = 4, beam_rounds: int = 3, rollout_batch_timeout: float = 3600.0,
                 run_initial_validation: bool = True, concurrent: bool = True, seed: int | None = None,
                 retries: int = 2) -> None:
        """Beyond upstream's arguments: `concurrent=False` evaluates candidates one after another, as
        upstream does; `seed` fixes the sampling of parents, batches and prompt variants; `retries` per
        model call."""
        self.client, self.diversity_temperature = async_openai_client, diversity_temperature
        self.gradient_model, self.apply_edit_model = gradient_model, apply_edit_model
        self.gradient_batch_size, self.val_batch_size = gradient_batch_size, val_batch_size
        self.beam_width, self.branch_factor, self.beam_rounds = beam_width, branch_factor, beam_rounds
        self.rollout_batch_timeout, self.run_initial_validation = rollout_batch_timeout, run_initial_validation
        self.concurrent, self.rng, self.retries = concurrent, random.Random(seed), retries
        self.run_id: str | None = None
        self.result: APOResult | None = None

    def get_best_prompt(self) -> PromptTemplate:
        """The best prompt of the last run (upstream's accessor)."""
        if self.result is None or self.result.prompt is None:
            raise ValueError("APO has not run yet")
        return self.result.prompt

    async def run(self, ctx: AlgorithmContext, train: Sequence[Any], val: Sequence[Any] | None
                  ) -> dict[str, SplitResult]:
        if not train or not val:
            raise ValueError("APO needs a training and a validation dataset")
        latest = await ctx.store.get_latest_resources()
        named = dict(latest.resources) if latest is not None else {}
        name = next((k for k, v in named.items() if isinstance(v, PromptTemplate)), None)
        if name is None:
            raise ValueError("APO optimizes the first PromptTemplate of the initial resources: there is none "
                             "(Trainer(initial_resources={'prompt_template': PromptTemplate(...)}))")
        seed = named[name]
        assert isinstance(seed, PromptTemplate)
        self.run_id = uuid.uuid4().hex[:12]
        evaluator = StoreEvaluator(ctx, named, name, seed.engine, self.run_id, self.rollout_batch_timeout)
        result = await self.optimize(seed, train, val, evaluator)
        best = result.prompt
        assert best is not None
        final = await ctx.publish_resources({**named, name: best})  # the best prompt becomes the latest
        log.info("APO run %s: best score %.3f (%s), published as %s; %d candidates, %d failed edits",
                 self.run_id, result.score, result.resources_id, final.resources_id, result.candidates,
                 result.failed_edits)
        return {"val": result, "best": result}

    async def optimize(self, seed: PromptTemplate, train: Sequence[Any], val: Sequence[Any], evaluator: Evaluator
                       ) -> APOResult:
        """The beam search from `seed`; `evaluator` publishes, runs and records."""
        editor = PromptEditor(self.client, gradient_model=self.gradient_model,
                              apply_edit_model=self.apply_edit_model, temperature=self.diversity_temperature,
                              rng=self.rng, retries=self.retries)
        train_batches = batches(train, self.gradient_batch_size, self.rng)
        val_batches = batches(val, self.val_batch_size, self.rng)
        run = _Run(self, evaluator, editor)
        first = Candidate(seed.template, 0)
        await run.propose(first)
        best, best_scored = BestSoFar(first), None
        if self.run_initial_validation:
            best_scored = await run.score(first, list(val), "full")
            best.offer(first, best_scored.score)
        beam = [first]
        for round_ in range(1, self.beam_rounds + 1):
            parents = sample_parents(beam, self.beam_width, self.rng)
            jobs = [(parent, next(train_batches)) for parent in parents for _ in range(self.branch_factor)]
            children = await self._all([run.branch(parent, tasks, round_) for parent, tasks in jobs])
            candidates = [*beam, *(c for c in children if c is not None)]
            val_batch = next(val_batches)
            scored = await self._all([run.score(c, val_batch, "batch", round_) for c in candidates])
            for candidate, result in zip(candidates, scored, strict=True):
                candidate.score = result.score
            beam = select_beam(candidates, self.beam_width)
            leader = await run.score(beam[0], list(val), "full", round_)
            if best.offer(beam[0], leader.score):
                best_scored = leader
            log.info("round %d: beam %s; leader %.3f on the full validation set, best so far %.3f", round_,
                     ", ".join(f"{c.id}:{c.score:.3f}" for c in beam if c.score is not None), leader.score,
                     best.score)
        split = best_scored.split if best_scored is not None else None
        self.result = APOResult(
            "val", split.rollouts if split else [], split.rewards if split else [],
            prompt=PromptTemplate(template=best.candidate.template, engine=seed.engine), score=best.score,
            resources_id=best.candidate.id, failed_edits=run.failed, candidates=run.proposed)
        return self.result

    async def _all(self, jobs: Sequence[Awaitable[Any]]) -> list[Any]:
        if self.concurrent:
            return list(await asyncio.gather(*jobs))
        return [await job for job in jobs]


@dataclass
class _Run:
    """One optimization run's steps: each one published, run and recorded through the evaluator."""

    apo: APO
    evaluator: Evaluator
    editor: PromptEditor
    proposed: int = 0
    failed: int = 0

    async def propose(self, candidate: Candidate) -> None:
        candidate.id = await self.evaluator.publish(candidate)
        self.proposed += 1
        await self.evaluator.record(self._step(candidate.id, "proposed", candidate.round,
                                               parent_id=candidate.parent_id, template=candidate.template,
                                               critique=candidate.critique))

    async def score(self, candidate: Candidate, tasks: Sequence[Any], scope: str, round_: int = 0) -> Scored:
        result = await self.evaluator.evaluate(candidate, tasks, "val")
        assert candidate.id is not None
        await self.evaluator.record(self._step(candidate.id, "scored", round_, scope=scope, score=result.score,
                                               rollout_ids=result.rollout_ids))
        return result

    async def branch(self, parent: Candidate, tasks: Sequence[Any], round_: int) -> Candidate | None:
        """A child of `parent`: its training batch, a critique, an edit; None if the edit failed."""
        critique = None
        try:
            batch = await self.evaluator.evaluate(parent, tasks, "train")
            sampled = (batch.experiments if len(batch.experiments) <= self.apo.gradient_batch_size
                       else self.apo.rng.sample(batch.experiments, self.apo.gradient_batch_size))
            critique = await self.editor.critique(parent.template, sampled)
            child = Candidate(await self.editor.edit(parent.template, critique), round_, parent.id, critique)
        except EditFailed as exc:
            self.failed += 1
            log.error("round %d: an edit of %s failed: %s", round_, parent.id, exc)
            await self.evaluator.record(self._step(f"edit-{uuid.uuid4().hex[:12]}", "failed", round_,
                                                   parent_id=parent.id, critique=critique, reason=str(exc)))
            return None
        await self.propose(child)
        return child

    def _step(self, candidate_id: str, stage: str, round_: int, **fields: Any) -> PromptCandidateStep:
        assert self.apo.run_id is not None
        return PromptCandidateStep(run_id=self.apo.run_id, candidate_id=candidate_id, stage=stage,  # type: ignore[arg-type]
                                   round=round_, **fields)


class StoreEvaluator:
    """Candidates as resources versions of the experiment, run on its runners, recorded in its log."""

    def __init__(self, ctx: AlgorithmContext, resources: dict[str, Any], name: str, engine: str, run_id: str,
                 timeout: float) -> None:
        self.ctx, self.resources, self.name, self.engine = ctx, resources, name, engine
        self.run_id, self.timeout = run_id, timeout
        self.adapter = TraceToMessages()

    async def publish(self, candidate: Candidate) -> str:
        prompt = PromptTemplate(template=candidate.template, engine=self.engine)  # type: ignore[arg-type]
        return (await self.ctx.publish_resources({**self.resources, self.name: prompt})).resources_id

    async def evaluate(self, candidate: Candidate, tasks: Sequence[Any], mode: str) -> Scored:
        split = await self.ctx.run_split(tasks, mode, resources_id=candidate.id, timeout=self.timeout)
        experiments = []
        for rollout, reward in zip(split.rollouts, split.rewards, strict=True):
            spans = list(await self.ctx.store.query_spans(rollout.rollout_id, "latest"))
            experiments.append({"status": rollout.status, "final_reward": reward,
                                "messages": self.adapter(spans) if spans else []})
        rewards = [r or 0.0 for r in split.rewards]  # as upstream: a rollout without reward scores 0
        return Scored(sum(rewards) / max(1, len(rewards)), [r.rollout_id for r in split.rollouts], experiments,
                      split)

    async def record(self, step: PromptCandidateStep) -> None:
        await self.ctx.store.record_prompt_candidate(step)


__all__ = ["APO", "APOResult", "Evaluator", "Scored", "StoreEvaluator"]

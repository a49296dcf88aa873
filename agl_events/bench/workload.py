"""The store workload of the side-by-side benchmark: its parameters and our side's agent.

The workload reproduces Agent Lightning's store benchmark: N rollouts enqueued in batches, each doing
randint(1, max_rounds) rounds of a parent span with two nested children carrying random nested
attributes, a reward with probability 0.5, then a final span and a final reward. Its shape is defined
once, in the stdlib-only `agl_side` module (which must also run in Agent Lightning's own venv), and
imported here, so both stores receive the same spans from the same seeds.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from agl_events.agent import rollout
from agl_events.bench.agl_side import expected_spans, make_tasks, plan_rollout, run_plan
from agl_events.emitter import emit_reward, operation

__all__ = ["OURS_ONLY", "PRESETS", "WorkloadParams", "expected_spans", "make_tasks", "plan_rollout", "workload_agent"]


#: Parameters of our side only: Agent Lightning's runners are one process running one rollout each.
OURS_ONLY = ("concurrency", "our_runners")


class WorkloadParams(BaseModel):
    """Everything that shapes a run; the same values go to both sides."""

    rollouts: int = Field(50, ge=1)
    runners: int = Field(2, ge=1)
    max_rounds: int = Field(3, ge=1)
    batch_size: int = Field(10, ge=1, description="rollouts per enqueue_many_rollouts call")
    span_sleep: float = Field(0.0, ge=0, description="seconds slept inside each leaf and final span")
    reward_p: float = Field(0.5, ge=0, le=1, description="probability of a reward span after a round")
    seed: int = 0
    concurrency: int = Field(1, ge=1, description="rollouts each of our runners runs at once (AGL's run one each)")
    our_runners: int = Field(0, ge=0, description="our runner processes (0: as many as AGL's runners)")

    def our_processes(self) -> int:
        return self.our_runners or self.runners

    def scaled(self, factor: float) -> WorkloadParams:
        """The same scenario `factor` times smaller, for a machine that cannot hold the published one: rollouts,
        runners and batch size divided (at least 1 each), the shape of a rollout (rounds, sleeps, rewards) kept.
        Our side's slots in all are divided alike (an agl-* preset's stay as many as AGL's runners), in processes
        of at most the preset's slots each (so a scaled agl-* preset runs fewer of our runner processes); a
        factor of 1 changes nothing."""
        if factor <= 0:
            raise ValueError(f"scale factor must be positive, got {factor}")
        slots = max(1, round(self.our_processes() * self.concurrency / factor))
        processes = max(1, math.ceil(slots / self.concurrency))
        return self.model_copy(update={"rollouts": max(1, round(self.rollouts / factor)),
                                       "runners": max(1, round(self.runners / factor)),
                                       "batch_size": max(1, round(self.batch_size / factor)),
                                       "our_runners": processes, "concurrency": math.ceil(slots / processes)})

    def tasks(self) -> list[dict[str, Any]]:
        return make_tasks(self.rollouts, self.max_rounds, self.reward_p, self.span_sleep, self.seed)

    def expected_spans(self) -> int:
        return sum(expected_spans(plan_rollout(int(t["seed"]), self.max_rounds, self.reward_p)) for t in self.tasks())

    def agl_side_args(self) -> list[str]:
        """The same parameters as flags of the `agl_side` script."""
        return ["--rollouts", str(self.rollouts), "--runners", str(self.runners), "--max-rounds", str(self.max_rounds),
                "--batch-size", str(self.batch_size), "--span-sleep", str(self.span_sleep),
                "--reward-p", str(self.reward_p), "--seed", str(self.seed)]


#: small: a quick look (the whole command in a few minutes); medium: the reference figures (our 4 runners run
#: up to 16 rollouts at once each; Agent Lightning's LitAgentRunner runs one).
#: agl-*: the scenarios of Agent Lightning's own store benchmark (tests/benchmark/benchmark_store.py, run by its
#: .github/workflows/benchmark.yml: total tasks, batch size, runners, max rounds, sleep). Its agent sleeps
#: uniform(0, s) in each leaf and final span where ours sleeps a fixed `span_sleep`: s / 2 keeps the mean. Its
#: runners are processes; ours are fewer processes with as many slots in all. They need far more than 2 cores
#: and Agent Lightning's side one ~350 MB process per runner: run them smaller with --scale F (and --rollouts for
#: a shorter run; docs/performance.md#agent-lightnings-own-scenarios has the scales used on 2 cores).
PRESETS: dict[str, WorkloadParams] = {
    "small": WorkloadParams(rollouts=50, runners=2, max_rounds=3),
    "medium": WorkloadParams(rollouts=200, runners=4, max_rounds=5, concurrency=16),
    "agl-minimal": WorkloadParams(rollouts=4096, runners=32, max_rounds=6, batch_size=256, span_sleep=0.25,
                                  our_runners=4, concurrency=8),
    "agl-medium": WorkloadParams(rollouts=10_000, runners=100, max_rounds=10, batch_size=1000, span_sleep=0.05,
                                 our_runners=4, concurrency=25),
    "agl-midhigh": WorkloadParams(rollouts=20_000, runners=300, max_rounds=6, batch_size=2048, span_sleep=0.05,
                                  our_runners=4, concurrency=75),
    "agl-large-batch": WorkloadParams(rollouts=50_000, runners=1000, max_rounds=3, batch_size=8192,
                                      span_sleep=0.05, our_runners=8, concurrency=125),
    "agl-heavy-traces": WorkloadParams(rollouts=10_000, runners=512, max_rounds=20, batch_size=1024,
                                       span_sleep=0.5, our_runners=8, concurrency=64),
}


@rollout
def workload_agent(task: dict[str, Any]) -> float:
    """Module level so spawned runner processes can import it; the body is shared with the AGL side."""
    return run_plan(task, operation, emit_reward)

"""When a chaos run acts, as a pure function of its config: each kill and restart at a count of finished
rollouts, and the rollouts enqueued right before it, so that every action lands while rollouts run.

Actions are spread by progress, not time (a run on a slower machine still kills mid-work): kill k of n when
k/(n+2) of the rollouts enqueued at the start have finished, a broker or rolling restart halfway, between kills.
Progress alone does not keep them inside the workload: a broker action blocks the run's loop (a leader kill
waits for the failover and for the node's replicas, a rolling restart for every node in turn) while the
workload goes on, so later actions come due back to back, and the 5,000-rollout cluster run's sixth leader kill
came after its last rollout had finished. So a run holds back a share of its rollouts and enqueues one piece of
it right before each action: whatever the actions before took, each one finds at least that piece running.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

#: The share of a run's rollouts held back from the start, to be fed in pieces, one before each action.
HELD_BACK = 0.25


class PlanSettings(Protocol):
    """The settings a plan is made from (a run's whole configuration, `chaos.run.ChaosConfig`, has them):
    declared here, so that the pure plan does not import the run that executes it."""

    rollouts: int
    kills: int
    leader_kills: int
    broker_restarts: int
    rolling_restart: bool


@dataclass(frozen=True)
class Step:
    """One action: "store", "processor" or "runner" (a SIGKILL), "leader" (a cluster's), "broker" or "rolling"."""

    at: int  #: rollouts finished when it is due
    action: str
    feed: range  #: the workload's rollouts (by input index) enqueued right before it


@dataclass(frozen=True)
class Plan:
    first: range  #: the rollouts enqueued at the start
    steps: list[Step]


def _actions(config: PlanSettings, rng: random.Random) -> list[tuple[float, str]]:
    """(fraction of the first rollouts finished, action), in order."""
    targets = ["store", "processor", "runner"] * (config.kills // 3 + 1)
    chosen = targets[:3] + rng.sample(targets[3:], max(0, config.kills - 3)) if config.kills >= 3 else \
        targets[:config.kills]
    chosen += ["leader"] * config.leader_kills
    rng.shuffle(chosen)
    n = len(chosen)
    actions = [((k + 1) / (n + 2), target) for k, target in enumerate(chosen)]
    restarts = ["broker"] * config.broker_restarts + ["rolling"] * config.rolling_restart
    actions += [((n // 2 + 1.5) / (n + 2), restart) for restart in restarts]  # between kills
    return sorted(actions)


def plan(config: PlanSettings, rng: random.Random) -> Plan:
    """The run's actions, each due at a count below what was enqueued before it and fed its own rollouts."""
    actions = _actions(config, rng)
    held = min(config.rollouts // 2, max(len(actions), round(config.rollouts * HELD_BACK))) if actions else 0
    first = config.rollouts - held
    bounds = [first + held * k // len(actions) for k in range(len(actions) + 1)] if actions else [first]
    steps = [Step(int(fraction * first), action, range(bounds[k], bounds[k + 1]))
             for k, (fraction, action) in enumerate(actions)]
    return Plan(range(first), steps)

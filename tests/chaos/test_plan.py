"""A chaos run's plan, without running one: every action is due while rollouts it fed itself still run, however
long the actions before it blocked the run; and a cluster's watchdog outwaits a failover."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agl_events.chaos.plan import plan
from agl_events.chaos.run import ChaosConfig

#: The failover times the cluster runs measured on a loaded 2-core machine reached 16 s (docs/reliability.md).
MEASURED_FAILOVER_SECONDS = 16.0


def _long_run(tmp_path: Path, **changes: int) -> ChaosConfig:
    """The long cluster run's settings (6 leader kills, a rolling restart, no process killed)."""
    return ChaosConfig(**{"rollouts": 5000, "runners": 4, "kills": 0, "broker_restarts": 0, "brokers": 3,
                          "leader_kills": 6, "rolling_restart": True, "home": tmp_path, **changes})


@pytest.mark.parametrize("changes", [{}, {"rollouts": 150, "leader_kills": 1}, {"rollouts": 8000},
                                     {"rollouts": 10, "leader_kills": 3}])
def test_each_action_is_due_before_the_rollouts_enqueued_so_far_are_done_and_feeds_its_own(
        tmp_path: Path, changes: dict[str, int]) -> None:
    config = _long_run(tmp_path, **changes)
    planned = plan(config, random.Random(0))
    fed = [planned.first, *(step.feed for step in planned.steps)]
    assert [i for part in fed for i in part] == list(range(config.rollouts))  # each rollout once, in order
    assert [s.action for s in planned.steps].count("leader") == config.leader_kills
    assert [s.action for s in planned.steps].count("rolling") == 1
    enqueued = len(planned.first)
    for step in planned.steps:
        assert step.at < enqueued  # due at a count the run reaches without anything further enqueued
        assert len(step.feed) > 0  # and what it enqueues right before is still running when it acts
        enqueued += len(step.feed)
    assert [s.at for s in planned.steps] == sorted(s.at for s in planned.steps)


def test_the_long_runs_sixth_leader_kill_finds_rollouts_running(tmp_path: Path) -> None:
    """The 5,000-rollout run's sixth kill came after the workload (the actions before it blocked the loop while
    the runners finished everything); now the kills come due among the first 3,750 and each feeds ~178 more."""
    planned = plan(_long_run(tmp_path), random.Random(0))
    leader_kills = [step for step in planned.steps if step.action == "leader"]
    assert len(planned.first) == 3750 and all(len(s.feed) >= 178 for s in planned.steps)
    assert leader_kills[-1].at < len(planned.first) and leader_kills[-1].feed.stop <= 5000


def test_a_clusters_watchdog_waits_out_a_failover_and_one_brokers_retries_soon(tmp_path: Path) -> None:
    assert _long_run(tmp_path).unresponsive_seconds > 1.5 * MEASURED_FAILOVER_SECONDS
    assert ChaosConfig(kills=3, home=tmp_path).unresponsive_seconds < MEASURED_FAILOVER_SECONDS

"""The short chaos run of `make test`: 100 rollouts on 3 runners, a SIGKILL each of the store, the processor and
a runner, one broker restart (a broker of the run's own, on free ports), and nothing lost, doubled or left
unfinished. Kills land by progress (after 1/5, 2/5 and 3/5 of the first rollouts finished, the broker restart at
1/2), each right after a piece of the rollouts held back was enqueued (`chaos.plan`), so each one hits work in
flight; `agl-events chaos` runs the longer ones (300 rollouts, 5 kills)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agl_events.chaos.run import ChaosConfig, run_chaos

pytestmark = pytest.mark.kafka

#: 150 until the plan fed a piece of the workload in before each action; 100 leave 25 held back, 6 or 7 a piece.
ROLLOUTS = 100


def test_nothing_is_lost_or_doubled_through_kills_and_a_broker_restart(tmp_path: Path) -> None:
    lines: list[str] = []
    report = run_chaos(ChaosConfig(rollouts=ROLLOUTS, runners=3, kills=3, home=tmp_path / "chaos"), say=lines.append)
    print("\n".join(lines), json.dumps(report.model_dump()), sep="\n")
    assert report.problems == []
    assert (report.rollouts, report.lost, report.duplicated, report.non_terminal, report.gaps) == (ROLLOUTS, 0, 0, 0, 0)
    assert report.kills == 3 and set(report.kills_by_target) == {"store", "processor", "runner"}
    assert report.broker_restarts == 1
    assert report.rebuild_equal and report.processor_equal
    assert report.statuses == {"succeeded": ROLLOUTS} and report.spans >= ROLLOUTS * 4

"""The short chaos run of `make test`: 300 rollouts on 3 runners, 5 SIGKILLs over store, processor and runners,
one broker restart (a broker of the run's own, on free ports), and nothing lost, doubled or left unfinished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agl_events.chaos.run import ChaosConfig, run_chaos

pytestmark = pytest.mark.kafka


def test_nothing_is_lost_or_doubled_through_kills_and_a_broker_restart(tmp_path: Path) -> None:
    lines: list[str] = []
    report = run_chaos(ChaosConfig(rollouts=300, runners=3, kills=5, home=tmp_path / "chaos"), say=lines.append)
    print("\n".join(lines), json.dumps(report.model_dump()), sep="\n")
    assert report.problems == []
    assert (report.rollouts, report.lost, report.duplicated, report.non_terminal, report.gaps) == (300, 0, 0, 0, 0)
    assert report.kills == 5 and set(report.kills_by_target) == {"store", "processor", "runner"}
    assert report.broker_restarts == 1
    assert report.rebuild_equal and report.processor_equal
    assert report.statuses == {"succeeded": 300} and report.spans >= 300 * 4

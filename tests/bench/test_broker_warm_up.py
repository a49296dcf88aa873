"""The local broker's warm-up before a benchmark: rounds of our side's workload, measured by the JIT's share."""

from __future__ import annotations

import os

import pytest

from agl_events.bench.broker_warm_up import warm_up
from agl_events.bench.workload import WorkloadParams
from agl_events.config import Settings

pytestmark = pytest.mark.kafka


async def test_a_process_compiling_nothing_is_warm_after_two_rounds_of_the_workload(settings: Settings) -> None:
    """This test's own process stands for a broker whose JIT compiler is done (it has no compiler threads): one
    round of the workload runs through our store and runners to its end, the second shows it so again, and the
    warm-up stops."""
    reports: list[tuple[int, float]] = []
    params = WorkloadParams(rollouts=1, our_runners=1, concurrency=2, max_rounds=1)
    shares = await warm_up(settings, params, os.getpid(), lambda *report: reports.append(report), rollouts=4,
                           max_rounds=3)
    assert shares == [0.0, 0.0] and reports == [(1, 0.0), (2, 0.0)]

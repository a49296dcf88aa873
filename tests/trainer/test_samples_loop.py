"""The loop through Kafka: groups enqueued, samples made by the samples worker, batches by group, a new
version published in between, and stale samples skipped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agl_events import Trainer
from agl_events.algorithm import AlgorithmContext, SplitResult
from agl_events.config import Settings
from agl_events.samples.batching import BatchPolicy, BatchStats
from agl_events.samples.model import Sample
from tests.trainer.agents import template_echo
from tests.trainer.test_resource_versions import _version

pytestmark = pytest.mark.kafka


class TwoSteps:
    """Step 1 under version 1; publish version 2 and 3; step 2's batch may only hold version-3 samples."""

    def __init__(self) -> None:
        self.batches: list[list[Sample]] = []
        self.stats = BatchStats()

    async def run(self, ctx: AlgorithmContext, train: Sequence[Any], val: Sequence[Any] | None
                  ) -> dict[str, SplitResult]:
        async with ctx.sample_stream(BatchPolicy(batch_size=4, max_staleness=0)) as stream:
            await ctx.enqueue_groups(train, group_size=2)
            first = await stream.next_batch(timeout=120)
            assert first is not None
            self.batches.append(first.samples)
            await stream.commit()
            await ctx.publish_resources(_version(2))
            await ctx.enqueue_groups(train, group_size=2)  # generation 2: stale once 3 is out
            await ctx.publish_resources(_version(3))
            await ctx.enqueue_groups(train, group_size=2)
            second = await stream.next_batch(timeout=120)
            assert second is not None
            self.batches.append(second.samples)
            await stream.commit()
            self.stats = stream.stats
        return {}


def test_batches_hold_whole_groups_of_the_current_version(settings: Settings, tmp_path: Path) -> None:
    algorithm = TwoSteps()
    trainer = Trainer(algorithm, n_runners=2, initial_resources=_version(1), settings=settings,
                      view_dir=tmp_path / "view", progress=False)
    trainer.fit(template_echo, [{"suffix": ""}, {"suffix": ".0"}])
    first, second = algorithm.batches
    assert len(first) == 4 and {s.final_reward for s in first} == {1.0}
    assert {s.resources_generation for s in first} == {1}
    assert sorted(len([s for s in first if s.group_id == g]) for g in {s.group_id for s in first}) == [2, 2]
    assert {s.final_reward for s in second} == {3.0} and {s.resources_generation for s in second} == {3}
    assert algorithm.stats.skipped_stale == 4  # version 2's two groups, finished before or after 3 came out

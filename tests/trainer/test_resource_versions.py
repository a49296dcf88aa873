"""An algorithm publishes a new resources version; rollouts enqueued after it run with it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agl_events import Trainer
from agl_events.algorithm import AlgorithmContext, SplitResult
from agl_events.config import Settings
from agl_events.emitter.reward import find_final_reward
from agl_events.types import PromptTemplate
from tests.trainer.agents import template_echo

pytestmark = pytest.mark.kafka


def _version(n: int) -> dict[str, PromptTemplate]:
    return {"prompt_template": PromptTemplate(template=f"{n}{{suffix}}", engine="f-string")}


class PublishBetweenGroups:
    """Two rounds of groups, publishing a new template version in between (as APO or GRPO would)."""

    def __init__(self) -> None:
        self.generations: list[int | None] = []
        self.rewards: list[list[float | None]] = []

    async def run(self, ctx: AlgorithmContext, train: Sequence[Any], val: Sequence[Any] | None
                  ) -> dict[str, SplitResult]:
        for n in (1, 2):
            await ctx.publish_resources(_version(n))
            self.generations.append(await ctx.current_generation())
            queued = await ctx.enqueue_groups(train, group_size=2)
            finished = await ctx.wait_all([r.rollout_id for r in queued], "train")
            self.rewards.append([find_final_reward(list(await ctx.store.query_spans(r.rollout_id, "latest")))
                                 for r in finished])
        return {}


def test_rollouts_enqueued_after_a_publish_run_with_the_new_version(settings: Settings, tmp_path: Path) -> None:
    algorithm = PublishBetweenGroups()
    trainer = Trainer(algorithm, n_runners=1, initial_resources=_version(0), settings=settings,
                      view_dir=tmp_path / "view", progress=False)
    trainer.fit(template_echo, [{"suffix": ""}, {"suffix": ".0"}])
    assert algorithm.generations == [2, 3]  # the initial resources are generation 1
    assert algorithm.rewards == [[1.0] * 4, [2.0] * 4]

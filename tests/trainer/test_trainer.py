"""Trainer.dev and Trainer.fit with Baseline, end to end: store, runner processes, tracer, results."""

from __future__ import annotations

from pathlib import Path

import pytest

from agl_events import Baseline, Trainer
from agl_events.config import Settings
from agl_events.demo.agent import adder
from agl_events.types import PromptTemplate, RolloutConfig
from tests.trainer.agents import meet

pytestmark = pytest.mark.kafka

TEMPLATE = {"prompt_template": PromptTemplate(template="What is {a} + {b}?", engine="f-string")}


def _expected_reward(item: dict[str, int]) -> float:
    """What `adder` earns on an item (it is deterministic per item)."""
    import random

    rng = random.Random(item["a"] * 1000 + item["b"])
    return 0.0 if rng.random() < 0.2 else 1.0


def test_dev_runs_the_dataset_once_through_everything(settings: Settings, tmp_path: Path) -> None:
    dataset = [{"a": i, "b": i} for i in range(10)]
    trainer = Trainer(n_runners=2, initial_resources=TEMPLATE, settings=settings, view_dir=tmp_path / "view",
                      rollout_config=RolloutConfig(max_attempts=2, retry_condition=["failed"]), progress=False)
    result = trainer.dev(adder, dataset)
    assert result.mode == "val" and result.succeeded == 10
    assert [r.input for r in result.rollouts] == dataset
    assert result.rewards == [_expected_reward(item) for item in dataset]
    assert result.adapted == [[] for _ in dataset]  # the default TracerTraceToTriplet: adder makes no LLM calls


def test_fit_with_baseline_reports_train_and_val(settings: Settings, tmp_path: Path) -> None:
    train = [{"a": i, "b": 1} for i in range(20)]
    val = [{"a": i, "b": 2} for i in range(5)]
    retry = RolloutConfig(max_attempts=2, retry_condition=["failed"])
    trainer = Trainer(Baseline(), n_runners=2, initial_resources=TEMPLATE, settings=settings,
                      view_dir=tmp_path / "view", rollout_config=retry, progress=False)
    results = trainer.fit(adder, train, val)
    assert set(results) == {"train", "val"}
    assert results["train"].succeeded == 20 and results["val"].succeeded == 5
    assert {r.mode for r in results["train"].rollouts} == {"train"}
    expected = [_expected_reward(item) for item in train]
    assert results["train"].rewards == expected
    assert results["train"].mean_reward == sum(expected) / len(expected)
    assert all(n in (1, 2) for n in results["train"].attempts)  # a failed first attempt is retried once


def test_runner_concurrency_runs_rollouts_of_one_runner_at_once(settings: Settings, tmp_path: Path) -> None:
    """One runner with `runner_concurrency=3` runs three rollouts together: `meet` only succeeds when three
    of its rollouts wait for one another in one process (a runner running one at a time fails them all)."""
    trainer = Trainer(n_runners=1, runner_concurrency=3, settings=settings, view_dir=tmp_path / "view",
                      progress=False)
    result = trainer.dev(meet, [{"n": i} for i in range(3)])
    assert result.succeeded == 3 and result.rewards == [1.0, 1.0, 1.0]

"""GRPO through the whole loop on the real broker: runners call the policy server through the LLM proxy,
the samples worker makes samples with the token ids and logprobs, GRPO trains on them and publishes new
weights versions, and held-out success (greedy, through the runners) rises."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from agl_events import Trainer
from agl_events.algorithm.grpo import GRPO
from agl_events.config import Settings
from agl_events.demo.reverse import reverse_agent, reverse_tasks

pytestmark = pytest.mark.kafka

#: About 1,300 rollouts. The same loop in one process (`python -m agl_events.bench.grpo_recipe --steps 30
#: --eval-every 5 --lr 5e-3 --train-tasks 64`, 8 sampling seeds, 2026-12-06) goes from 0.15 held-out mean reward
#: to 0.15-0.49 at 20 steps and 0.31-0.70 at 30 with 2 epochs per batch, and to 0.45-0.65 at 20 steps with 4
#: (`--epochs 4`): 20 steps of 4 epochs leave more margin over sampling luck than 30 of 2, for 2/3 the rollouts.
STEPS, EPOCHS = 20, 4


def test_grpo_learns_to_reverse_digits(settings: Settings, tmp_path: Path) -> None:
    grpo = GRPO(steps=STEPS, prompts_per_step=8, group_size=8, lr=5e-3, epochs=EPOCHS, eval_every=STEPS)
    trainer = Trainer(grpo, n_runners=2, adapter={"llm_call_match": "litellm_request"},
                      settings=settings.model_copy(update={"home": tmp_path}), view_dir=tmp_path / "view",
                      progress=False)
    results = trainer.fit(reverse_agent, reverse_tasks(64, seed=1), val_dataset=reverse_tasks(32, seed=2))

    start, end = grpo.history[0], grpo.history[-1]
    print(f"held-out mean reward {start.mean_reward:.3f} -> {end.mean_reward:.3f} in {STEPS} steps")
    assert (start.step, start.version, end.step, end.version) == (0, 1, STEPS, STEPS + 1)
    assert end.mean_reward >= start.mean_reward + 0.1, grpo.history
    first, last = grpo.train_rewards[:5], grpo.train_rewards[-5:]
    assert sum(last) / 5 >= sum(first) / 5 + 0.1, grpo.train_rewards  # sampled (training) reward rises too
    assert results["val"].succeeded == 32 and len(grpo.train_rewards) == STEPS
    assert sorted(p.name for p in (tmp_path / "policy" / settings.experiment).iterdir()) == sorted(
        [f"v{n}.pt" for n in range(1, STEPS + 2)] + [f"v{n}.optimizer.pt" for n in range(1, STEPS + 2)])


def test_a_restarted_grpo_trainer_goes_on_from_its_last_version(settings: Settings, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """A second trainer on the same experiment and home starts at the first one's last version and step."""
    caplog.set_level(logging.INFO, logger="agl_events.algorithm.grpo")
    cfg = settings.model_copy(update={"home": tmp_path})

    def fit(steps: int) -> GRPO:
        grpo = GRPO(steps=steps, prompts_per_step=2, group_size=4, lr=5e-3, eval_every=steps)
        Trainer(grpo, n_runners=2, adapter={"llm_call_match": "litellm_request"}, settings=cfg,
                view_dir=tmp_path / "view", progress=False
                ).fit(reverse_agent, reverse_tasks(8, seed=1), val_dataset=reverse_tasks(8, seed=2))
        return grpo

    first, second = fit(2), fit(4)
    assert [(e.step, e.version) for e in first.history] == [(0, 1), (2, 3)]
    assert [(e.step, e.version) for e in second.history] == [(2, 3), (4, 5)]
    assert second.history[0].mean_reward == first.history[-1].mean_reward  # the same weights, decoded greedily
    assert len(second.train_rewards) == 2
    assert "resuming from weights v3 (2 steps done)" in caplog.text and "fresh optimiser" not in caplog.text
    folder = tmp_path / "policy" / settings.experiment
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"v{n}.pt" for n in range(1, 6)] + [f"v{n}.optimizer.pt" for n in range(1, 6)])
    assert torch.load(folder / "v5.optimizer.pt", weights_only=True)["version"] == 5

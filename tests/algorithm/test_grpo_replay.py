"""GRPO retrained from a recorded history: a live run through the Trainer on the real broker, then the same
hyperparameters and seed trained again offline on the samples it recorded end at the weights it published last,
bit for bit, with the same batch rewards; a differently filtered history ends elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agl_events import Trainer
from agl_events.algorithm.grpo import GRPO
from agl_events.config import Settings
from agl_events.demo.reverse import reverse_agent, reverse_tasks
from agl_events.events.codec import AvroCodec
from agl_events.policy.model import Policy
from agl_events.policy.weights import load_weights, weights_path
from agl_events.samples.history import ReplayedSampleStream, ReplayFilter

pytestmark = pytest.mark.kafka

STEPS = 3


def _grpo() -> GRPO:
    """The recipe, the same for the live run and every retrain."""
    return GRPO(steps=STEPS, prompts_per_step=2, group_size=4, lr=5e-3, eval_every=STEPS, seed=0,
                proxy_launch_mode="thread")  # a proxy process starts slower than these small steps take


def _same(a: Policy, b: Policy) -> bool:
    left, right = a.state_dict(), b.state_dict()
    return left.keys() == right.keys() and all(torch.equal(left[name], right[name]) for name in left)


def test_retraining_on_the_recorded_samples_gives_the_live_runs_weights(settings: Settings, tmp_path: Path) -> None:
    cfg = settings.model_copy(update={"home": tmp_path})
    live = _grpo()
    Trainer(live, n_runners=2, adapter={"llm_call_match": "litellm_request"}, settings=cfg,
            view_dir=tmp_path / "view", progress=False
            ).fit(reverse_agent, reverse_tasks(8, seed=1), val_dataset=reverse_tasks(4, seed=2))
    published = [load_weights(weights_path(tmp_path, settings.experiment, v).as_uri()) for v in range(1, STEPS + 2)]
    assert not _same(published[0], published[-1])  # the live run did move the weights

    def replay(selection: ReplayFilter | None = None) -> ReplayedSampleStream:
        return ReplayedSampleStream(settings.bootstrap_servers, settings.experiment, AvroCodec(), selection)

    offline, steps = _grpo(), list[tuple[int, float]]()
    torch.set_num_threads(2)  # as a fresh process has it (the live run's policy server left one)
    with replay() as stream:
        final = offline.retrain(stream, save_to=tmp_path / "retrained", on_step=lambda n, r: steps.append((n, r)))
        assert (stream.late, stream.incomplete, stream.stats.duplicates) == (0, 0, 0)
    assert torch.get_num_threads() == 2  # the caller's setting, given back
    assert _same(final, published[-1])
    assert offline.train_rewards == live.train_rewards and len(steps) == STEPS
    assert steps == list(enumerate(live.train_rewards, start=1))
    assert all(_same(load_weights((tmp_path / "retrained" / f"v{v}.pt").as_uri()), published[v - 1])
               for v in range(1, STEPS + 2))  # every version on the way, the initial one included

    picky = _grpo()
    with replay(ReplayFilter(min_reward=0.01)) as stream:  # groups with an answer all wrong left out
        filtered = picky.retrain(stream)
        assert stream.incomplete > 0
    assert not _same(filtered, published[-1])

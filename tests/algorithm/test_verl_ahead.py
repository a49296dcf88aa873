"""VERL's rollouts running ahead of its trainer: which finished groups fill a step's rows (pure bookkeeping),
and the batch they make as verl's rollout correction reads it, checked with verl's own functions."""

from __future__ import annotations

import math

import pytest
import torch

from agl_events.algorithm.grpo_math import decoupled_loss
from agl_events.algorithm.verl_ahead import AheadPool, Taken
from agl_events.algorithm.verl_batch import verl_batch
from agl_events.algorithm.verl_trainer import verl_config
from agl_events.samples.model import Sample
from agl_events.types import Triplet


def _sample(rollout: str, reward: float = 1.0, logprobs: tuple[float, ...] = (-0.5, -0.5)) -> Sample:
    triplet = Triplet(prompt={"token_ids": [1, 2]}, response={"token_ids": [3, 4][:len(logprobs)],
                                                             "logprobs": list(logprobs)})
    return Sample(sample_id=f"{rollout}:a", rollout_id=rollout, attempt_id="a", group_id=rollout.split(".")[0],
                  status="succeeded", final_reward=reward, adapter="test", triplets=[triplet])


def _group(pool: AheadPool, name: str, version: int) -> str:
    """A group of two rollouts (`name.0`, `name.1`) enqueued under `version`: its key."""
    return pool.add([f"{name}.0", f"{name}.1"], version)


def _finish(pool: AheadPool, *names: str) -> None:
    for name in names:
        pool.offer(_sample(f"{name}.0"))
        pool.offer(_sample(f"{name}.1"))


def _filled(taken: Taken | None) -> dict[str, str]:
    """Slot uid -> the group that filled it."""
    assert taken is not None
    return {uid: samples[0].group_id for uid, samples in taken.samples.items()}


def test_synchronous_each_slot_is_filled_by_its_own_group_and_nothing_older_survives() -> None:
    pool = AheadPool(max_staleness=0)
    assert pool.publish(1) == 0 and pool.top_up(2) == 2  # exactly the call's own groups
    own = {"ua": _group(pool, "a", 1), "ub": _group(pool, "b", 1)}
    _finish(pool, "b")
    assert pool.take(own) is None  # waits for every group of the step
    _finish(pool, "a")
    taken = pool.take(own)
    assert _filled(taken) == {"ua": "a", "ub": "b"} and taken is not None and taken.versions == {"ua": 1, "ub": 1}
    assert [s.rollout_id for s in taken.samples["ua"]] == ["a.0", "a.1"]

    late = _group(pool, "c", 2)  # a group of step 2 that never finishes in time
    assert late and pool.publish(3) == 1 and pool.flight.dropped == 1
    _finish(pool, "c")
    pool.offer(_sample("stranger.0"))
    assert (pool.stale_samples, pool.foreign_samples) == (2, 1)


def test_one_step_ahead_fills_rows_with_groups_at_most_one_version_old_and_gives_up_older() -> None:
    pool = AheadPool(max_staleness=1)
    # step 1: two steps' worth in flight, the prompts' own groups and one more each
    assert pool.publish(1) == 0 and pool.top_up(2) == 4
    own = {"ua": _group(pool, "a", 1), "ub": _group(pool, "b", 1)}
    _group(pool, "a2", 1), _group(pool, "b2", 1)
    _finish(pool, "a", "b2")  # b, the slot's own group, is slow: another finished group takes its rows
    taken = pool.take(own)
    assert _filled(taken) == {"ua": "a", "ub": "b2"} and taken is not None and taken.versions == {"ua": 1, "ub": 1}

    # step 2: b and a2 still run (enqueued under version 1); the step tops up with its own two
    assert pool.publish(2) == 0 and pool.top_up(2) == 2
    own = {"uc": _group(pool, "c", 2), "ud": _group(pool, "d", 2)}
    _finish(pool, "c", "a2")
    taken = pool.take(own)
    assert _filled(taken) == {"uc": "c", "ud": "a2"} and taken is not None and taken.versions == {"uc": 2, "ud": 1}

    # step 3: b (version 1) is two versions old: given up, replaced by one more group; its samples are stale
    assert pool.publish(3) == 1 and pool.top_up(2) == 3
    own = {"ue": _group(pool, "e", 3), "uf": _group(pool, "f", 3)}
    _group(pool, "e2", 3)
    _finish(pool, "b", "e", "d", "f")
    taken = pool.take(own)
    assert _filled(taken) == {"ue": "e", "uf": "d"} and taken is not None and taken.versions == {"ue": 3, "uf": 2}
    assert pool.stale_samples == 2 and (pool.flight.trained, pool.flight.dropped) == (6, 1)
    assert pool.flight.pending == 2  # f and e2 run on into step 4


def test_a_slot_takes_only_a_group_of_its_own_size() -> None:
    pool = AheadPool(max_staleness=1)
    pool.publish(1)
    own = {"u0": pool.add(["p.0", "p.1", "p.2"], 1), "u1": _group(pool, "q", 1)}  # verl padded u0's rows
    _group(pool, "r", 1)
    _finish(pool, "r")
    assert pool.take(own) is None  # r could fill u1, but nothing of size 3 is finished for u0
    pool.offer(_sample("p.0")), pool.offer(_sample("p.1")), pool.offer(_sample("p.2"))
    assert _filled(pool.take(own)) == {"u0": "p", "u1": "r"}


def test_the_batch_carries_the_recorded_logprobs_and_verl_corrects_with_them_as_decoupled_ppo() -> None:
    """verl's decoupled rollout correction, as `VERL(max_staleness=1)` configures it, on a hand-made group:
    rollout_is_weights = min(pi_old / pi_rollout, 2) per token, and the weighted PPO loss is ours."""
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, compute_policy_loss_vanilla
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
    from verl.utils.config import omega_conf_to_dataclass

    config = verl_config("/models/tiny", ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"], max_staleness=1)
    correction = config.algorithm.rollout_correction
    assert (correction.rollout_is, correction.rollout_is_threshold, correction.bypass_mode) == ("token", 2.0, False)
    assert verl_config("/models/tiny").algorithm.rollout_correction.rollout_is is None  # synchronous: as before

    behaviour = [(-1.0, -2.0), (-0.5, -3.0)]  # what the proxy recorded when the tokens were sampled
    samples = [_sample("g.0", 1.0, behaviour[0]), _sample("g.1", 0.0, behaviour[1])]
    data = verl_batch(samples, pad_token_id=0, max_prompt_length=2, max_response_length=3).to_dataproto()
    assert data.batch["rollout_log_probs"].tolist() == [[-1.0, -2.0, 0.0], [-0.5, -3.0, 0.0]]
    mask = data.batch["response_mask"]
    assert mask.tolist() == [[1, 1, 0], [1, 1, 0]]

    # the actor's logprobs under the weights the step starts from (verl's old_log_probs: the proximal policy)
    proximal = torch.tensor([[-0.5, -2.0, 0.0], [-1.0, -1.0, 0.0]])
    data.batch["old_log_probs"] = proximal
    data, _ = compute_rollout_correction_and_add_to_batch(data, correction)
    weights = data.batch["rollout_is_weights"]
    expected = [[math.exp(0.5), 1.0, 0.0], [math.exp(-0.5), 2.0, 0.0]]  # exp(2) = 7.39 truncated at 2
    assert weights.tolist() == [pytest.approx(row) for row in expected]

    advantages, _ = compute_grpo_outcome_advantage(data.batch["token_level_scores"], mask, data.non_tensor_batch["uid"])
    new = torch.tensor([[-0.3, -2.2, 0.0], [-1.1, -0.9, 0.0]])  # the policy being trained
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    loss, _ = compute_policy_loss_vanilla(proximal, new, advantages, mask, "token-mean", actor, weights)
    ours = decoupled_loss(new, proximal, data.batch["rollout_log_probs"], advantages[:, 0], mask.float())
    assert loss.item() == pytest.approx(ours.item())
    # by hand: A = +-1/(std+eps) ~ +-1; r = exp(new - proximal) clipped to [0.8, 1.2]
    a = advantages[0, 0].item()
    by_hand = -(math.exp(0.5) * a * min(math.exp(0.2), 1.2) + 1.0 * a * math.exp(-0.2)
                + math.exp(-0.5) * -a * math.exp(-0.1) + 2.0 * -a * min(math.exp(0.1), 1.2)) / 4
    assert loss.item() == pytest.approx(by_hand)

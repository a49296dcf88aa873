"""Samples as verl's batch, laid out as Agent Lightning 0.3.0's VERL daemon lays out its store's triplets."""

from __future__ import annotations

import pytest
import torch

from agl_events.algorithm.verl_batch import verl_batch
from agl_events.samples.model import Sample
from agl_events.types import Triplet

PAD = 0


def _sample(rollout: str, group: str, reward: float | None, *calls: tuple[list[int], list[int], list[float] | None]
            ) -> Sample:
    triplets = [Triplet(prompt={"token_ids": p}, response={"token_ids": r, **({"logprobs": lp} if lp else {})})
                for p, r, lp in calls]
    return Sample(sample_id=f"{rollout}:a", rollout_id=rollout, attempt_id="a", group_id=group, status="succeeded",
                  final_reward=reward, adapter="TracerTraceToTriplet", triplets=triplets)


def test_rows_are_left_padded_prompts_and_right_padded_responses_with_the_reward_on_the_last_token() -> None:
    batch = verl_batch([_sample("r1", "g1", 0.5, ([5, 6], [7, 8, 9], [-0.1, -0.2, -0.3]), ([5, 6, 7], [10], [-1.0])),
                        _sample("r2", "g1", None, ([4], [11, 12], [-0.5, -0.6]))],
                       pad_token_id=PAD, max_prompt_length=3, max_response_length=4)
    t = batch.tensors
    assert t["input_ids"].tolist() == [[0, 5, 6, 7, 8, 9, 0], [5, 6, 7, 10, 0, 0, 0], [0, 0, 4, 11, 12, 0, 0]]
    assert t["attention_mask"].tolist() == [[0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 0, 0]]
    assert t["position_ids"].tolist() == [[0, 0, 1, 2, 3, 4, 4], [0, 1, 2, 3, 3, 3, 3], [0, 0, 0, 1, 2, 2, 2]]
    assert torch.equal(t["input_ids"], torch.cat([t["prompts"], t["responses"]], -1))
    assert t["token_level_scores"].tolist() == [[0, 0, 0.5, 0], [0.5, 0, 0, 0], [0, 0, 0, 0]]  # None -> 0
    assert t["rollout_log_probs"][0].tolist() == pytest.approx([-0.1, -0.2, -0.3, 0.0])
    assert (batch.uid, batch.rollout_ids, batch.turn_index) == (["g1"] * 3, ["r1", "r1", "r2"], [0, 1, 0])
    assert t["is_drop_mask"].tolist() == [False, False, False] and batch.truncated_responses == 0


def test_long_prompts_are_cut_and_marked_long_responses_cut_and_counted() -> None:
    batch = verl_batch([_sample("r1", "g", 1.0, ([1, 2, 3, 4, 5], [6, 7, 8], None), ([1], [], None))],
                       pad_token_id=PAD, max_prompt_length=3, max_response_length=2)
    t = batch.tensors
    assert t["prompts"].tolist() == [[1, 2, 3]] and t["responses"].tolist() == [[6, 7]]  # the empty call skipped
    assert t["is_drop_mask"].tolist() == [True] and batch.truncated_responses == 1
    assert t["token_level_scores"].tolist() == [[0.0, 1.0]]
    assert "rollout_log_probs" not in t  # not every row has them


def test_a_batch_without_responses_is_refused() -> None:
    with pytest.raises(ValueError, match="nothing for verl"):
        verl_batch([_sample("r1", "g", 1.0, ([1], [], None))], pad_token_id=PAD, max_prompt_length=2,
                   max_response_length=2)


def test_a_chat_that_grows_turn_by_turn_is_one_trajectory_row_trained_on_the_sampled_tokens_only() -> None:
    # turn 2's prompt = turn 1's prompt + response + [20, 21] (a tool's output): those two are not trained on
    sample = _sample("r1", "g1", 1.0, ([5, 6], [7, 8], [-0.1, -0.2]), ([5, 6, 7, 8, 20, 21], [9], [-0.3]),
                     ([1, 2], [3], [-0.4]))  # a fresh prompt: not a continuation, a row of its own
    batch = verl_batch([sample], pad_token_id=PAD, max_prompt_length=2, max_response_length=6, level="trajectory")
    t = batch.tensors
    assert t["responses"].tolist() == [[7, 8, 20, 21, 9, 0], [3, 0, 0, 0, 0, 0]]
    assert t["response_mask"].tolist() == [[1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0]]
    assert t["attention_mask"][:, 2:].tolist() == [[1, 1, 1, 1, 1, 0], [1, 0, 0, 0, 0, 0]]
    assert t["rollout_log_probs"][0].tolist() == pytest.approx([-0.1, -0.2, 0.0, 0.0, -0.3, 0.0])
    assert t["token_level_scores"].tolist() == [[0, 0, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0]]
    assert (batch.turn_index, batch.unmerged) == ([0, 2], 1)


def test_one_row_per_sample_keeps_the_last_row_and_gives_a_sample_without_calls_an_empty_one() -> None:
    chained = _sample("r1", "g", 0.5, ([1], [2], [-0.1]), ([1, 2, 3], [4], [-0.2]))
    failed = _sample("r2", "g", 0.25)  # a rollout that failed before its first call
    batch = verl_batch([chained, failed], pad_token_id=PAD, max_prompt_length=2, max_response_length=3,
                       level="trajectory", one_row_per_sample=True)
    t = batch.tensors
    assert batch.rollout_ids == ["r1", "r2"] and (batch.unmerged, batch.empty) == (0, 1)
    assert t["responses"].tolist() == [[2, 3, 4], [0, 0, 0]] and t["response_mask"].tolist() == [[1, 0, 1], [0] * 3]
    assert t["token_level_scores"].tolist() == [[0, 0, 0.5], [0.25, 0, 0]]  # the empty row's reward still counts
    assert t["attention_mask"][1].tolist() == [0] * 5


def test_the_batch_is_a_verl_dataproto_whose_grpo_advantages_are_normalised_per_group() -> None:
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    samples = [_sample(f"r{i}", group, reward, ([1, 2], [3, 4], [-0.5, -0.5]))
               for i, (group, reward) in enumerate([("a", 1.0), ("a", 0.0), ("b", 0.5), ("b", 0.5)])]
    data = verl_batch(samples, pad_token_id=PAD, max_prompt_length=2, max_response_length=2).to_dataproto()
    assert len(data) == 4 and list(data.non_tensor_batch["uid"]) == ["a", "a", "b", "b"]
    advantages, _ = compute_grpo_outcome_advantage(data.batch["token_level_scores"], data.batch["response_mask"],
                                                   data.non_tensor_batch["uid"])
    per_row = advantages[:, 0].tolist()
    assert per_row[0] > 0 > per_row[1] and per_row[2:] == [0.0, 0.0]  # one group split, the other all alike
    assert per_row[0] == pytest.approx(-per_row[1])

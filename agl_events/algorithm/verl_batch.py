"""Samples from the samples topic as the batch verl trains on: the tensors of its DataProto, transition level.

The layout is the one Agent Lightning 0.3.0's VERL daemon builds from its store (`verl/daemon.py`), so a verl
trainer fed from Kafka sees what it would see there: one row per triplet (LLM call); prompts left-padded to
`max_prompt_length`, responses right-padded to `max_response_length`; `input_ids` their concatenation,
`attention_mask` 1 on real tokens, `position_ids = cumsum(attention_mask) - 1` (0 on the left padding); the
rollout's final reward on the row's last real token (`token_level_scores`, response part only); a prompt
longer than the limit is cut to its first `max_prompt_length` tokens and marked in `is_drop_mask` (kept, so
the group's advantage is computed over all of it, and dropped from the loss by the trainer), a response cut
to the limit and counted. `uid` is the sample's group id: GRPO normalises rewards among rows sharing it.

Beyond upstream, the logprobs recorded when each token was sampled ride along as `rollout_log_probs` (verl's
name for them) when every row has them, so verl can correct for the sampler/trainer mismatch. Scores are
float32 where upstream uses bfloat16. Pure torch; `to_dataproto` needs verl (the gpu extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agl_events.samples.model import Sample


@dataclass
class VerlBatch:
    tensors: dict[str, torch.Tensor]
    #: Per row: the GRPO group (the sample's group id), the rollout, and which of its LLM calls it is.
    uid: list[str]
    rollout_ids: list[str]
    turn_index: list[int]
    #: Rows whose response was longer than `max_response_length` and cut.
    truncated_responses: int

    def to_dataproto(self) -> Any:
        """verl's DataProto of this batch (tensors, plus uid / rollout id / turn index as non-tensors)."""
        import numpy as np
        from verl import DataProto

        return DataProto.from_dict(tensors=self.tensors, non_tensors={
            "uid": np.array(self.uid, dtype=object), "rollout_id": np.array(self.rollout_ids, dtype=object),
            "turn_index": np.array(self.turn_index)})


def _left(ids: list[int], length: int, pad: int) -> tuple[list[int], list[int]]:
    return [pad] * (length - len(ids)) + ids, [0] * (length - len(ids)) + [1] * len(ids)


def _right(values: list[Any], length: int, pad: Any) -> tuple[list[Any], list[int]]:
    return values + [pad] * (length - len(values)), [1] * len(values) + [0] * (length - len(values))


def verl_batch(samples: Sequence[Sample], *, pad_token_id: int, max_prompt_length: int,
               max_response_length: int) -> VerlBatch:
    """One row per triplet with token ids (triplets without a response are skipped); raises if none has."""
    prompts, prompt_masks, responses, response_masks, logprobs = [], [], [], [], []
    rewards, drops, uid, rollout_ids, turns = [], [], [], [], []
    truncated = 0
    for sample in samples:
        for turn, triplet in enumerate(sample.triplets):
            prompt = list(triplet.prompt.get("token_ids") or [])
            response = list(triplet.response.get("token_ids") or [])
            if not response:
                continue
            drops.append(len(prompt) > max_prompt_length)
            prompt = prompt[:max_prompt_length]
            truncated += len(response) > max_response_length
            recorded = triplet.response.get("logprobs")
            logprobs.append(None if recorded is None or len(recorded) != len(response)
                            else [float(x) for x in recorded[:max_response_length]])
            response = response[:max_response_length]
            ids, mask = _left(prompt, max_prompt_length, pad_token_id)
            prompts.append(ids)
            prompt_masks.append(mask)
            ids, mask = _right(response, max_response_length, pad_token_id)
            responses.append(ids)
            response_masks.append(mask)
            rewards.append(sample.final_reward or 0.0)
            uid.append(sample.group_id)
            rollout_ids.append(sample.rollout_id)
            turns.append(turn)
    if not prompts:
        raise ValueError("no triplet with response token ids: nothing for verl to train on")
    prompt_ids, response_ids = torch.tensor(prompts), torch.tensor(responses)
    attention_mask = torch.cat([torch.tensor(prompt_masks), torch.tensor(response_masks)], dim=-1)
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=-1) - 1, min=0)
    scores = torch.zeros(attention_mask.shape, dtype=torch.float32)
    last = torch.argmax(position_ids * attention_mask, dim=-1)  # the row's last real token
    scores[torch.arange(len(rewards)), last] = torch.tensor(rewards, dtype=torch.float32)
    tensors = {"prompts": prompt_ids, "responses": response_ids, "input_ids": torch.cat([prompt_ids, response_ids], -1),
               "attention_mask": attention_mask, "position_ids": position_ids,
               "is_drop_mask": torch.tensor(drops, dtype=torch.bool),
               "token_level_scores": scores[:, -max_response_length:].contiguous()}
    if all(row is not None for row in logprobs):
        tensors["rollout_log_probs"] = torch.tensor([_right(row, max_response_length, 0.0)[0] for row in logprobs])
    return VerlBatch(tensors, uid, rollout_ids, turns, truncated)

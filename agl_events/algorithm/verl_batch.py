"""Samples from the samples topic as the batch verl trains on: the tensors of its DataProto.

The layout is the one Agent Lightning 0.3.0's VERL daemon builds from its store (`verl/daemon.py`), so a verl
trainer fed from Kafka sees what it would see there. Two levels, as upstream's `trace_aggregator.level`:

- `transition`: one row per triplet (LLM call);
- `trajectory`: a sample's calls merged into one row while each call's prompt starts with the previous
  prompt + response (a multi-turn chat growing turn by turn); the tokens a later prompt adds (tool output,
  the user's next turn) go into the response with `response_mask` 0, so only sampled tokens are trained
  on. A call that does not continue the chain starts a new row.

Either way prompts are left-padded to `max_prompt_length`, responses right-padded to `max_response_length`;
`input_ids` is their concatenation, `attention_mask` 1 on real tokens, `position_ids = cumsum(mask) - 1`
(0 on the left padding); the rollout's final reward sits on the row's last real token (`token_level_scores`,
response part only); a prompt longer than the limit is cut to its first `max_prompt_length` tokens and
marked in `is_drop_mask` (kept, so the group's advantage is computed over all of it), a response cut to the
limit and counted. `uid` is the sample's group id: GRPO normalises rewards among rows sharing it.

`one_row_per_sample` is for verl's own training loop, which joins the rollout output to its input batch row
by row: each sample gives exactly its last row (trajectory level: its whole chat when it chains), or an
empty response (all masks 0, reward still counted in its group) when it has no call with token ids, such as
a rollout that failed before its first call.

Beyond upstream, the logprobs recorded when each token was sampled ride along as `rollout_log_probs` (verl's
name for them) when every row has them, so verl can correct for the sampler/trainer mismatch. Scores are
float32 where upstream uses bfloat16. Pure torch; `to_dataproto` needs verl (the training extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from agl_events.samples.model import Sample
from agl_events.types import Triplet

Level = Literal["transition", "trajectory"]


@dataclass
class VerlBatch:
    tensors: dict[str, torch.Tensor]
    #: Per row: the GRPO group (the sample's group id), the rollout, and the first of its LLM calls it holds.
    uid: list[str]
    rollout_ids: list[str]
    turn_index: list[int]
    #: Rows whose response was longer than `max_response_length` and cut.
    truncated_responses: int
    #: Samples whose calls did not chain into one trajectory row (trajectory level), and samples with no row.
    unmerged: int = 0
    empty: int = 0

    def to_dataproto(self) -> Any:
        """verl's DataProto of this batch (tensors, plus uid / rollout id / turn index as non-tensors)."""
        import numpy as np
        from verl import DataProto

        return DataProto.from_dict(tensors=self.tensors, non_tensors={
            "uid": np.array(self.uid, dtype=object), "rollout_id": np.array(self.rollout_ids, dtype=object),
            "turn_index": np.array(self.turn_index)})


@dataclass
class _Row:
    """One training row before padding: response tokens with their mask (1: sampled) and logprobs."""

    turn: int
    prompt: list[int]
    response: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)

    def add(self, tokens: list[int], sampled: bool, logprobs: list[float] | None) -> None:
        self.response += tokens
        self.mask += [int(sampled)] * len(tokens)
        if self.logprobs is not None:
            self.logprobs = None if logprobs is None else self.logprobs + logprobs


def _call(triplet: Triplet) -> tuple[list[int], list[int], list[float] | None]:
    prompt = list(triplet.prompt.get("token_ids") or [])
    response = list(triplet.response.get("token_ids") or [])
    recorded = triplet.response.get("logprobs")
    logprobs = None if recorded is None or len(recorded) != len(response) else [float(x) for x in recorded]
    return prompt, response, logprobs


def _rows(sample: Sample, level: Level) -> list[_Row]:
    rows: list[_Row] = []
    context: list[int] | None = None  # the current trajectory row's prompt + response so far
    for turn, triplet in enumerate(sample.triplets):
        prompt, response, logprobs = _call(triplet)
        if not response:
            continue
        if level == "trajectory" and context is not None and prompt[:len(context)] == context:
            inserted = prompt[len(context):]
            rows[-1].add(inserted, False, [0.0] * len(inserted))
        else:
            rows.append(_Row(turn, prompt))
        rows[-1].add(response, True, logprobs)
        context = prompt + response
    return rows


def _left(ids: list[int], length: int, pad: int) -> tuple[list[int], list[int]]:
    return [pad] * (length - len(ids)) + ids, [0] * (length - len(ids)) + [1] * len(ids)


def _right(values: list[Any], length: int, pad: Any) -> list[Any]:
    return values + [pad] * (length - len(values))


def verl_batch(samples: Sequence[Sample], *, pad_token_id: int, max_prompt_length: int,
               max_response_length: int, level: Level = "transition", one_row_per_sample: bool = False
               ) -> VerlBatch:
    """The batch of `samples` at `level`; raises if no sample has a call with token ids, unless
    `one_row_per_sample` (then every sample has its row, an empty one if need be)."""
    picked: list[tuple[Sample, _Row]] = []
    unmerged = empty = 0
    for sample in samples:
        rows = _rows(sample, level)
        unmerged += level == "trajectory" and len(rows) > 1
        if one_row_per_sample:
            empty += not rows
            rows = rows[-1:] or [_Row(0, [])]
        picked += [(sample, row) for row in rows]
    if not picked:
        raise ValueError("no triplet with response token ids: nothing for verl to train on")
    prompts, prompt_masks, responses, response_masks, logprobs = [], [], [], [], []
    truncated = 0
    for _, row in picked:
        ids, mask = _left(row.prompt[:max_prompt_length], max_prompt_length, pad_token_id)
        prompts.append(ids)
        prompt_masks.append(mask)
        truncated += len(row.response) > max_response_length
        responses.append(_right(row.response[:max_response_length], max_response_length, pad_token_id))
        response_masks.append(_right(row.mask[:max_response_length], max_response_length, 0))
        logprobs.append(None if row.logprobs is None else _right(row.logprobs[:max_response_length],
                                                                 max_response_length, 0.0))
    prompt_ids, response_ids = torch.tensor(prompts), torch.tensor(responses)
    real_response = torch.tensor([_right([1] * min(len(row.response), max_response_length), max_response_length, 0)
                                  for _, row in picked])
    attention_mask = torch.cat([torch.tensor(prompt_masks), real_response], dim=-1)
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=-1) - 1, min=0)
    scores = torch.zeros(attention_mask.shape, dtype=torch.float32)
    last = torch.argmax(position_ids * attention_mask, dim=-1)  # the row's last real token
    last[real_response.sum(-1) == 0] = max_prompt_length  # an empty row: its first response slot, so it counts
    scores[torch.arange(len(picked)), last] = torch.tensor([s.final_reward or 0.0 for s, _ in picked])
    tensors = {"prompts": prompt_ids, "responses": response_ids, "input_ids": torch.cat([prompt_ids, response_ids], -1),
               "attention_mask": attention_mask, "position_ids": position_ids,
               "response_mask": torch.tensor(response_masks),
               "is_drop_mask": torch.tensor([len(row.prompt) > max_prompt_length for _, row in picked]),
               "token_level_scores": scores[:, -max_response_length:].contiguous()}
    if all(row is not None for row in logprobs):
        tensors["rollout_log_probs"] = torch.tensor(logprobs)
    return VerlBatch(tensors, [s.group_id for s, _ in picked], [s.rollout_id for s, _ in picked],
                     [row.turn for _, row in picked], truncated, unmerged, empty)

"""GRPO's arithmetic, on plain tensors: group-normalised advantages and the PPO-clipped token loss.

Kept apart from the algorithm (which moves samples between Kafka, the policy server and the optimiser) so
the numbers can be checked on hand-made inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def group_advantages(groups: Sequence[Sequence[float]], eps: float = 1e-6) -> list[list[float]]:
    """Each reward minus its group's mean, over the group's standard deviation (GRPO): a group whose
    rewards are all equal teaches nothing (all zeros)."""
    advantages = []
    for rewards in groups:
        r = torch.tensor(rewards, dtype=torch.float64)
        std = r.std(unbiased=False) if len(rewards) > 1 else torch.tensor(0.0, dtype=torch.float64)
        advantages.append(((r - r.mean()) / (std + eps)).tolist() if std > eps else [0.0] * len(rewards))
    return advantages


def clipped_loss(new_logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                 mask: torch.Tensor, clip: float = 0.2) -> torch.Tensor:
    """PPO's clipped surrogate, negated for minimising, averaged over every response token of the batch.

    `new_logprobs`, `old_logprobs` and `mask` are (batch, tokens); `advantages` is (batch,), one per
    sequence, given to each of its tokens. `old_logprobs` are those recorded when the token was sampled.
    """
    ratio = torch.exp(new_logprobs - old_logprobs)
    gain = advantages.unsqueeze(-1)
    surrogate = torch.minimum(ratio * gain, torch.clamp(ratio, 1 - clip, 1 + clip) * gain)
    return -(surrogate * mask).sum() / mask.sum().clamp(min=1.0)


def mean_entropy(entropy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The entropy of the policy's token distributions, averaged over every response token of the batch:
    subtracted from the loss (times a small coefficient) it keeps a group's samples from all agreeing on a
    partial answer, where GRPO's advantages, and so its gradient, vanish."""
    return (entropy * mask).sum() / mask.sum().clamp(min=1.0)

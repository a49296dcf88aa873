"""GRPO's arithmetic, on plain tensors: group-normalised advantages, the PPO-clipped token loss, and its
decoupled (off-policy) form for samples drawn by older weights.

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
    surrogate = _clipped_surrogate(torch.exp(new_logprobs - old_logprobs), advantages, clip)
    return -(surrogate * mask).sum() / mask.sum().clamp(min=1.0)


#: The cap on behaviour importance weights: verl's rollout correction (`rollout_is=token`) truncates its
#: token-level weights at `rollout_is_threshold`, 2.0 by default; AReaL's `behav_imp_weight_cap` (5 in its
#: examples) masks tokens above the cap instead. Truncating keeps every token's gradient, bounded.
IS_CAP = 2.0


def behaviour_weights(proximal_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor,
                      cap: float = IS_CAP) -> torch.Tensor:
    """pi_prox / pi_behav per token, truncated at `cap`, with no gradient: how much more (or less) likely
    the step's starting weights make a token than the weights that sampled it did."""
    return torch.exp(proximal_logprobs - behaviour_logprobs).detach().clamp(max=cap)


def decoupled_loss(new_logprobs: torch.Tensor, proximal_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor,
                   advantages: torch.Tensor, mask: torch.Tensor, clip: float = 0.2, cap: float = IS_CAP
                   ) -> torch.Tensor:
    """Decoupled PPO (AReaL's, verl's rollout correction without bypass) for samples from older weights:
    PPO's clip is taken around the proximal policy (the weights the step starts from, `proximal_logprobs`)
    rather than the behaviour policy that sampled (`behaviour_logprobs`, recorded by the proxy), and each
    token's surrogate is weighted by the truncated importance weight pi_prox / pi_behav:

        loss = -sum_t mask_t * min(pi_prox/pi_behav, cap) * min(r_t A, clip(r_t, 1-eps, 1+eps) A) / sum_t mask_t,
        r_t = pi_theta / pi_prox.

    Why not clip around the behaviour policy: a sample k versions old may already sit outside the trust
    region there, so the clip would zero its gradient (or let it run free) whatever this step does. With
    the proximal logprobs equal to the behaviour ones (a synchronous step), every weight is exactly 1 and
    this is `clipped_loss`, bit for bit.
    """
    weights = behaviour_weights(proximal_logprobs, behaviour_logprobs, cap)
    surrogate = _clipped_surrogate(torch.exp(new_logprobs - proximal_logprobs), advantages, clip)
    return -(weights * surrogate * mask).sum() / mask.sum().clamp(min=1.0)


def _clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip: float) -> torch.Tensor:
    """min(r A, clip(r, 1 - clip, 1 + clip) A) per token, each sequence's advantage given to its tokens."""
    gain = advantages.unsqueeze(-1)
    return torch.minimum(ratio * gain, torch.clamp(ratio, 1 - clip, 1 + clip) * gain)


def mean_entropy(entropy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The entropy of the policy's token distributions, averaged over every response token of the batch:
    subtracted from the loss (times a small coefficient) it keeps a group's samples from all agreeing on a
    partial answer, where GRPO's advantages, and so its gradient, vanish."""
    return (entropy * mask).sum() / mask.sum().clamp(min=1.0)

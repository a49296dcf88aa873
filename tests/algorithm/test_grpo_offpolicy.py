"""The off-policy correction of pipelined GRPO (decoupled PPO with truncated importance weights), on
hand-computed numbers, and its synchronous case: exactly today's PPO-clipped loss."""

from __future__ import annotations

import math

import pytest
import torch

from agl_events.algorithm.grpo_math import IS_CAP, behaviour_weights, clipped_loss, decoupled_loss


def _logs(probabilities: list[list[float]]) -> torch.Tensor:
    return torch.log(torch.tensor(probabilities, dtype=torch.float64))


def test_the_decoupled_loss_on_a_hand_computed_case() -> None:
    """Two sequences, advantages +1 and -1, clip 0.2, cap 2.0; the second sequence's second token is padding.

    Each token was sampled with probability 0.25 (behaviour, the proxy's record). The step's starting
    weights (proximal) give 0.3, 0.6 and 0.125: weights pi_prox / pi_behav = 1.2, 2.4 -> truncated to 2.0,
    and 0.5. The weights being optimised (new) give 0.33, 0.9 and 0.075: ratios r = new / prox = 1.1, 1.5
    and 0.6.

    token (0,0): A=+1, min(1.1, clip 1.1) = 1.1, weighted 1.2 * 1.1 = 1.32
    token (0,1): A=+1, min(1.5, clip 1.2) = 1.2, weighted 2.0 * 1.2 = 2.40
    token (1,0): A=-1, min(-0.6, -clip 0.8 = -0.8) = -0.8, weighted 0.5 * -0.8 = -0.40
    loss = -(1.32 + 2.40 - 0.40) / 3 tokens = -3.32 / 3 = -1.106667

    Gradient with respect to the new logprobs (d r / d logp = r): token (0,0) is inside the clip range,
    -w * r * A / 3 = -1.2 * 1.1 / 3 = -0.44; tokens (0,1) and (1,0) are clipped (their min is the
    constant branch): 0; the padding: 0.

    Plain PPO clipped around the behaviour policy would give ratios 1.32, 3.6 and 0.3, every one clipped:
    -(1.2 + 1.2 - 0.8) / 3 = -0.5333, and no gradient at all: the stale samples would teach nothing.
    """
    behaviour = _logs([[0.25, 0.25], [0.25, 1.0]])
    proximal = _logs([[0.3, 0.6], [0.125, 1.0]])
    new = _logs([[0.33, 0.9], [0.075, 1.0]]).requires_grad_()
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    advantages = torch.tensor([1.0, -1.0], dtype=torch.float64)

    assert behaviour_weights(proximal, behaviour, cap=2.0).flatten().tolist() == pytest.approx([1.2, 2.0, 0.5, 1.0])
    loss = decoupled_loss(new, proximal, behaviour, advantages, mask, clip=0.2, cap=2.0)
    assert float(loss.detach()) == pytest.approx(-3.32 / 3)
    loss.backward()
    assert new.grad is not None
    assert new.grad.flatten().tolist() == pytest.approx([-0.44, 0.0, 0.0, 0.0])
    plain = clipped_loss(new.detach(), behaviour, advantages, mask, clip=0.2)
    assert float(plain) == pytest.approx(-(1.2 + 1.2 - 0.8) / 3)


def test_the_weights_carry_no_gradient_and_are_truncated_at_the_cap() -> None:
    proximal = torch.tensor([[math.log(10.0), 0.0]], requires_grad=True)
    weights = behaviour_weights(proximal, torch.zeros(1, 2))
    assert not weights.requires_grad
    assert weights.flatten().tolist() == pytest.approx([IS_CAP, 1.0])


def test_with_proximal_equal_to_behaviour_it_is_todays_loss_exactly() -> None:
    """A synchronous step (max_staleness=0): the step's starting weights sampled, so every weight is
    exactly 1 and the loss and its gradient are today's `clipped_loss`, bit for bit."""
    generator = torch.Generator().manual_seed(7)
    old = -torch.rand(16, 5, generator=generator) * 3
    mask = (torch.rand(16, 5, generator=generator) > 0.2).float()
    advantages = torch.randn(16, generator=generator)
    start = old + torch.randn(16, 5, generator=generator) * 0.3
    new_today, new_decoupled = start.clone().requires_grad_(), start.clone().requires_grad_()

    today = clipped_loss(new_today, old, advantages, mask, clip=0.2)
    decoupled = decoupled_loss(new_decoupled, old, old, advantages, mask, clip=0.2)
    today.backward()
    decoupled.backward()
    assert torch.equal(today, decoupled)
    assert new_today.grad is not None and new_decoupled.grad is not None
    assert torch.equal(new_today.grad, new_decoupled.grad)

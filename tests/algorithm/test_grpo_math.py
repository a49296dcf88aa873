"""GRPO's arithmetic on hand-made numbers."""

from __future__ import annotations

import pytest
import torch

from agl_events.algorithm.grpo_math import clipped_loss, group_advantages, mean_entropy


def test_advantages_are_normalised_within_each_group() -> None:
    first, flat = group_advantages([[0.0, 1.0, 1.0, 0.0], [0.5, 0.5]])
    assert first == pytest.approx([-1.0, 1.0, 1.0, -1.0], abs=1e-5)
    assert flat == [0.0, 0.0]  # all equal: nothing to learn from the group
    assert group_advantages([[1.0]]) == [[0.0]]


def test_the_loss_is_the_token_mean_of_the_clipped_surrogate() -> None:
    old = torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    new = torch.log(torch.tensor([[0.6, 0.9], [0.25, 0.5]]))  # ratios 1.2, 1.8 (clipped to 1.2); 0.5, pad
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    advantages = torch.tensor([1.0, -1.0])
    # positive advantage: min(r, clip(r)) = 1.2, 1.2; negative: min(-0.5, -0.8) = -0.8 (clipped at 1 - 0.2)
    assert float(clipped_loss(new, old, advantages, mask, clip=0.2)) == pytest.approx(-(1.2 + 1.2 - 0.8) / 3)


def test_the_gradient_raises_tokens_with_a_positive_advantage() -> None:
    new = torch.zeros(1, 1, requires_grad=True)
    clipped_loss(new, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1)).backward()
    assert new.grad is not None and float(new.grad) < 0  # descending the loss raises the logprob


def test_the_entropy_is_averaged_over_response_tokens_only() -> None:
    entropy, mask = torch.tensor([[1.0, 2.0], [3.0, 9.0]]), torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    assert float(mean_entropy(entropy, mask)) == pytest.approx(2.0)

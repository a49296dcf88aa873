"""One GRPO step's optimisation of the policy, as a value that crosses process boundaries.

`Tokens` (a batch's sequences, each with its advantage) and `PolicyUpdate` (the hyperparameters and the
`epochs` PPO steps on them) are plain picklable data, so the same update runs in the trainer's process
(`GRPO.retrain`, the recipe bench) and in the learner's own process (`algorithm.grpo_learner`) with the same
numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agl_events.algorithm.grpo_math import clipped_loss, decoupled_loss, mean_entropy
from agl_events.policy.model import Policy


@dataclass
class Tokens:
    """The sequences of one batch to train on, each with its sequence's advantage."""

    prompts: list[list[int]]
    responses: list[list[int]]
    old_logprobs: list[list[float]]
    advantages: list[float]


@dataclass(frozen=True)
class PolicyUpdate:
    """`epochs` PPO-clipped steps on a batch, with the logprobs recorded at sampling time as the old policy.

    `decoupled` (a pipelined loop, whose samples may come from older weights): decoupled PPO, clipped around
    the weights the step starts from and weighted by the truncated importance weight against the recorded
    logprobs (`grpo_math.decoupled_loss`); otherwise the plain clipped loss (the weights that sampled are the
    step's starting weights)."""

    epochs: int
    clip: float
    grad_clip: float
    temperature: float
    entropy_coef: float
    is_cap: float
    decoupled: bool

    def __call__(self, policy: Policy, optimizer: torch.optim.Optimizer, tokens: Tokens) -> None:
        if not tokens.prompts:
            return
        width = max(map(len, tokens.responses))
        old = torch.tensor([row + [0.0] * (width - len(row)) for row in tokens.old_logprobs])
        advantages = torch.tensor(tokens.advantages)
        proximal = None
        if self.decoupled:
            with torch.no_grad():
                proximal = policy.sequence_logprobs(tokens.prompts, tokens.responses,
                                                    temperature=self.temperature).logprobs
        policy.train()
        for _ in range(self.epochs):
            new, mask, entropy = policy.sequence_logprobs(tokens.prompts, tokens.responses,
                                                          temperature=self.temperature)
            loss = (clipped_loss(new, old, advantages, mask, self.clip) if proximal is None
                    else decoupled_loss(new, proximal, old, advantages, mask, self.clip, self.is_cap))
            if self.entropy_coef:
                loss = loss - self.entropy_coef * mean_entropy(entropy, mask)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), self.grad_clip)
            optimizer.step()
        policy.eval()

"""The policy: a small decoder-only pre-LN transformer, with sampling and the log probabilities training needs.

Sampling and training must agree on every number: PPO's ratio divides the probability the current weights
give a token by the one recorded when it was sampled, so `sample` reports the logprobs of the distribution
it drew from (logits / temperature) and `sequence_logprobs` recomputes exactly those for a batch.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from pydantic import BaseModel
from torch import nn


class TokenScores(NamedTuple):
    """Per response token (batch, longest response): logprob, mask (1.0 on tokens), distribution entropy."""

    logprobs: torch.Tensor
    mask: torch.Tensor
    entropy: torch.Tensor


class PolicyConfig(BaseModel):
    """Shape of the network; `seed` fixes its initial weights."""

    vocab_size: int
    layers: int = 2
    d_model: int = 32
    heads: int = 2
    max_len: int = 16
    seed: int = 0


class Policy(nn.Module):
    """Token and position embeddings, `layers` pre-LN blocks (causal self-attention, 4x MLP), a final norm
    and the output head. No dropout: sampling and training see the same function."""

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.config = config
        with torch.random.fork_rng():  # seeded weights, without touching the caller's random state
            torch.manual_seed(config.seed)
            self.tokens = nn.Embedding(config.vocab_size, config.d_model)
            self.positions = nn.Embedding(config.max_len, config.d_model)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(config.d_model, config.heads, dim_feedforward=4 * config.d_model,
                                           dropout=0.0, batch_first=True, norm_first=True)
                for _ in range(config.layers))
            self.norm = nn.LayerNorm(config.d_model)
            self.head = nn.Linear(config.d_model, config.vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (batch, length, vocab) for token ids (batch, length); position t sees positions <= t."""
        length = ids.shape[1]
        if length > self.config.max_len:
            raise ValueError(f"a sequence of {length} tokens is longer than max_len={self.config.max_len}")
        x = self.tokens(ids) + self.positions(torch.arange(length, device=ids.device))
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=ids.device)
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x))

    @torch.no_grad()
    def sample(self, prompt_ids: list[int], max_new_tokens: int, *, temperature: float = 1.0, eos_id: int,
               generator: torch.Generator | None = None, top: int = 0
               ) -> tuple[list[int], list[float], list[list[tuple[int, float]]]]:
        """Up to `max_new_tokens` tokens after the prompt, stopping after `eos_id` (kept, as vLLM keeps it).

        Returns the token ids, each one's logprob under the distribution drawn from, and per token the
        `top` most likely (id, logprob) pairs. `temperature=0` decodes greedily (logprobs at temperature 1).
        """
        ids, logprobs, tops = list(prompt_ids), [], []
        budget = min(max_new_tokens, self.config.max_len - len(prompt_ids))
        for _ in range(budget):
            logits = self(torch.tensor([ids]))[0, -1]
            dist = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
            drawn = dist.argmax() if temperature == 0 else torch.multinomial(dist.exp(), 1, generator=generator)
            token = int(drawn)
            ids.append(token)
            logprobs.append(float(dist[token]))
            best = torch.topk(dist, top) if top else None
            tops.append([] if best is None else list(zip(best.indices.tolist(), best.values.tolist(), strict=True)))
            if token == eos_id:
                break
        return ids[len(prompt_ids):], logprobs, tops

    def sequence_logprobs(self, prompts: list[list[int]], responses: list[list[int]], *, temperature: float = 1.0
                          ) -> TokenScores:
        """Logprobs (batch, longest response) of each response token given its prompt and the tokens before
        it, the mask (1.0 where a token is, 0.0 in the padding), and the entropy of each token's distribution
        (what an entropy bonus keeps from collapsing). Differentiable."""
        rows = [p + r for p, r in zip(prompts, responses, strict=True)]
        width, longest = max(map(len, rows)), max(map(len, responses))
        ids = torch.tensor([row + [0] * (width - len(row)) for row in rows])
        dist = torch.log_softmax(self(ids) / temperature, dim=-1)
        at = torch.zeros(len(rows), longest, dtype=torch.long)
        tokens = torch.zeros(len(rows), longest, dtype=torch.long)
        mask = torch.zeros(len(rows), longest)
        for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
            at[i, : len(r)] = torch.arange(len(p) - 1, len(p) - 1 + len(r))
            tokens[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1.0
        at_response = dist.gather(1, at.unsqueeze(-1).expand(-1, -1, dist.shape[-1]))
        picked = at_response.gather(2, tokens.unsqueeze(-1)).squeeze(-1)
        entropy = -(at_response.exp() * at_response).sum(-1)
        return TokenScores(picked * mask, mask, entropy * mask)

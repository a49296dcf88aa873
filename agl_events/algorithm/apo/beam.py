"""APO's beam search, as plain data: candidates, parents sampled from the beam, the beam kept, the best seen.

Pure (a seeded `random.Random` in, no I/O): the algorithm (`apo.algorithm`) runs rollouts and model calls
around these steps, the tests check them on hand-made candidates. The rules are Agent Lightning 0.3.0's.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Candidate:
    """A prompt template in the search; `id` is its resources version once published."""

    template: str
    round: int
    parent_id: str | None = None
    critique: str | None = None
    id: str | None = None
    score: float | None = None  # on the round's validation batch


def sample_parents(beam: Sequence[Candidate], width: int, rng: random.Random) -> list[Candidate]:
    """`width` parents: the whole beam repeated in turn while it is smaller than that, else a random choice
    of `width` distinct members."""
    if not beam:
        raise ValueError("the beam is empty")
    if len(beam) < width:
        return [beam[i % len(beam)] for i in range(width)]
    return rng.sample(list(beam), width)


def select_beam(candidates: Sequence[Candidate], width: int) -> list[Candidate]:
    """The `width` best by score (unscored last; ties keep their order: the beam before its children)."""
    if not candidates:
        raise ValueError("no candidates left to keep in the beam")
    ranked = sorted(candidates, key=lambda c: float("-inf") if c.score is None else c.score, reverse=True)
    return ranked[:width]


@dataclass
class BestSoFar:
    """The candidate with the best full-validation score seen in the run (the seed's, at first)."""

    candidate: Candidate
    score: float = float("-inf")

    def offer(self, candidate: Candidate, score: float) -> bool:
        """Keep `candidate` if it scores strictly better; says whether it did."""
        if score > self.score:
            self.candidate, self.score = candidate, score
            return True
        return False


def batches(items: Sequence[Any], size: int, rng: random.Random) -> Iterator[list[Any]]:
    """Endless batches of `size` (all items if fewer), reshuffled after each pass, as upstream."""
    if not items:
        raise ValueError("an empty dataset gives no batches")
    pool: list[Any] = []
    while True:
        if len(pool) < min(size, len(items)):
            order = list(items)
            rng.shuffle(order)
            pool += order
        batch, pool = pool[:size], pool[size:]
        yield batch


def template_variables(template: str) -> set[str]:
    """The f-string fields a template fills (`{question}` -> question)."""
    return {field.split(".")[0].split("[")[0] for _, field, _, _ in string.Formatter().parse(template)
            if field}

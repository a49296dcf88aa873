"""APO's beam rules on hand-made candidates: parents, selection, the best seen, batches, template fields."""

from __future__ import annotations

import random

import pytest

from agl_events.algorithm.apo.beam import BestSoFar, Candidate, batches, sample_parents, select_beam, template_variables


def _scored(*scores: float | None) -> list[Candidate]:
    return [Candidate(f"p{i}", 1, id=f"c{i}", score=s) for i, s in enumerate(scores)]


def test_a_small_beam_is_repeated_to_the_width_a_full_one_sampled_without_repeats() -> None:
    small = _scored(0.1, 0.2)
    assert [c.id for c in sample_parents(small, 4, random.Random(0))] == ["c0", "c1", "c0", "c1"]
    full = _scored(0.1, 0.2, 0.3, 0.4, 0.5)
    picked = sample_parents(full, 3, random.Random(0))
    assert len({c.id for c in picked}) == 3 and {c.id for c in picked} <= {c.id for c in full}
    with pytest.raises(ValueError, match="empty"):
        sample_parents([], 2, random.Random(0))


def test_the_beam_keeps_the_best_scores_unscored_last_ties_in_order() -> None:
    kept = select_beam(_scored(0.5, None, 0.9, 0.5, 0.1), 3)
    assert [c.id for c in kept] == ["c2", "c0", "c3"]
    assert [c.id for c in select_beam(_scored(None, 0.0), 2)] == ["c1", "c0"]
    with pytest.raises(ValueError, match="no candidates"):
        select_beam([], 2)


def test_the_best_so_far_changes_only_for_a_strictly_better_score() -> None:
    seed, a, b = _scored(None, None, None)
    best = BestSoFar(seed)
    assert best.offer(seed, 0.5) and not best.offer(a, 0.5) and best.candidate is seed
    assert best.offer(b, 0.75) and (best.candidate, best.score) == (b, 0.75)


def test_batches_cover_every_item_each_pass_and_never_run_dry() -> None:
    items = list(range(5))
    stream = batches(items, 2, random.Random(1))
    first_pass = [x for _ in range(2) for x in next(stream)] + next(stream)[:1]
    assert sorted(first_pass) == items
    assert all(len(next(stream)) == 2 for _ in range(10))
    assert next(batches([1, 2], 5, random.Random(0))) in ([1, 2], [2, 1])  # fewer items than a batch: all


def test_template_variables_are_the_fields_it_fills() -> None:
    assert template_variables("Q: {question}\nUse {tools[0]} and {user.name}; {{literal}}") == {
        "question", "tools", "user"}

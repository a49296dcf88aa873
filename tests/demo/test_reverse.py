"""The toy task: seeded tasks, a training split that never holds a held-out task, partial credit."""

from __future__ import annotations

import pytest

from agl_events.demo.reverse import prompt_of, reverse_tasks, reward_of


def test_training_tasks_leave_out_the_held_out_ones_and_are_the_same_for_a_seed() -> None:
    val = reverse_tasks(32, seed=2)
    train = reverse_tasks(720, seed=1, exclude=val)
    assert not {tuple(t["digits"]) for t in train} & {tuple(t["digits"]) for t in val}
    assert len(train) == 720 and train == reverse_tasks(720, seed=1, exclude=val)
    assert {tuple(t["digits"]) for t in reverse_tasks(720, seed=1)} & {tuple(t["digits"]) for t in val}  # else


def test_the_reward_is_the_share_of_positions_right() -> None:
    task = {"digits": [1, 2, 3]}
    assert prompt_of(task) == "1 2 3 ="
    assert [reward_of(task, a) for a in ("3 2 1", "3 2 9", "1 2 3", "")] == pytest.approx([1, 2 / 3, 1 / 3, 0])

"""The pipelined-GRPO benchmark's `--policy` sizes: presets, numbers, and what is refused."""

from __future__ import annotations

import pytest

from agl_events.bench.async_grpo import SIZES, PolicySize
from agl_events.demo.learn import LEARNING_RATE
from agl_events.policy.model import PolicyConfig


def test_the_demo_preset_is_the_demos_policy_and_recipe() -> None:
    demo = PolicySize.parse("demo")
    defaults = PolicyConfig(vocab_size=1)
    assert (demo.d_model, demo.layers, demo.heads, demo.lr) == (defaults.d_model, defaults.layers,
                                                                 defaults.heads, LEARNING_RATE)
    assert PolicySize.parse("learner") == SIZES["learner"]


def test_numbers_give_a_size_at_the_given_rate_with_heads_of_64_dimensions_by_default() -> None:
    assert PolicySize.parse("256,3", lr=5e-4) == PolicySize("256x3", 256, 3, 4, 5e-4)
    assert PolicySize.parse("96,2,3") == PolicySize("96x2", 96, 2, 3, LEARNING_RATE)
    assert PolicySize.parse("64,1").heads == 2  # at least two heads
    config = PolicySize.parse("256,3").config()
    assert (config.d_model, config.layers, config.heads) == (256, 3, 4)


@pytest.mark.parametrize("text", ["huge", "256", "256,x", "256,2,4,1", "0,2", "100,2,3"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"policy size|split evenly"):
        PolicySize.parse(text)

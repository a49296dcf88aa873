"""The tasks `agl-events demo --task NAME` can train, each with what the demo, the test and the recipe bench
need to know of it: its agent, its tasks, its turns (`play`, for the one-process bench), its adapter and the
GRPO recipe measured for it.

- `reverse` (the default, `make demo`): one LLM call per rollout, reverse three digits.
- `tools`: two LLM calls per rollout, name a tool then answer from its output, one reward at the end; the
  adapter gives each call's transition that final reward (`adapter.final_reward`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agl_events.agent import LitAgent
from agl_events.demo import reverse, tools

#: A task set's maker: `(count, seed, exclude)` -> that many seeded tasks, none of them in `exclude`.
MakeTasks = Callable[[int, int, Sequence[dict[str, Any]]], list[dict[str, Any]]]


@dataclass(frozen=True)
class DemoTask:
    """One trainable task. `steps`, `lr`, `epochs` and `entropy_coef` are its GRPO recipe (`demo.learn`)."""

    name: str
    agent: LitAgent[Any]
    make_tasks: MakeTasks
    play: Callable[[dict[str, Any], Callable[[str, int], str]], float]
    #: What the policy learns, as the CLI says it ("to reverse three digits").
    goal: str
    #: The learning curve's title (a line of the PNG).
    title: str
    #: `Trainer(adapter=...)`: how the samples worker turns a rollout's spans into transitions.
    adapter: Mapping[str, Any]
    steps: int
    lr: float
    epochs: int
    entropy_coef: float


TASKS: dict[str, DemoTask] = {task.name: task for task in (
    #: The recipe, chosen with `python -m agl_events.bench.grpo_recipe` (the same loop in one process, over
    #: sampling seeds): lr 3e-3 alone ended 90 steps at 0.76-0.98 held-out mean reward (some seeds collapse onto
    #: a partial answer: every sample of a group alike, so no gradient). Now: new tasks every step (720 drawn,
    #: none of them held out), 4 epochs per batch, and an entropy bonus of 0.05 against that collapse; measured
    #: in docs/training-loop.md.
    DemoTask("reverse", reverse.reverse_agent, reverse.reverse_tasks, reverse.play, "to reverse three digits",
             "reversing three digits",
             {"llm_call_match": "litellm_request"}, steps=90, lr=3e-3, epochs=4, entropy_coef=0.05),
    DemoTask("tools", tools.tool_agent, tools.tool_tasks, tools.play,
             "to name a tool, then answer from its output (two LLM calls a rollout)",
             "name a tool, then answer from its output (two calls a rollout)",
             {"type": "FinalRewardTriplets", "llm_call_match": "litellm_request"}, steps=150, lr=3e-3,
             epochs=4, entropy_coef=0.05),
)}

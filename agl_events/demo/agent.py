"""The agent `make demo` trains: adds two numbers, sometimes wrongly, and is rewarded for being right.

Defined at module level so runner processes can import it. It reads the prompt template resource,
traces its steps, fails now and then (so retries show), and returns its reward.
"""

from __future__ import annotations

import random
from typing import Any

from agl_events.agent import rollout
from agl_events.emitter import operation
from agl_events.types import PromptTemplate, Rollout


@rollout
def adder(task: dict[str, Any], prompt_template: PromptTemplate, rollout: Rollout) -> float:
    rng = random.Random(task["a"] * 1000 + task["b"])
    prompt = prompt_template.format(a=task["a"], b=task["b"])
    with operation(step="think", prompt=prompt):
        guess = task["a"] + task["b"] + (rng.choice([-1, 1]) if rng.random() < 0.2 else 0)
    if rng.random() < 0.1 and rollout.attempt.sequence_id == 1:  # type: ignore[attr-defined]
        raise RuntimeError("the model timed out (simulated); the store retries the rollout")
    with operation(step="answer", answer=guess):
        pass
    return 1.0 if guess == task["a"] + task["b"] else 0.0

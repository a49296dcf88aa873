"""The toy task GRPO learns on CPUs: reverse three digits ("1 2 3 =" -> "3 2 1").

Small enough that a 27k-parameter policy learns it in minutes, with a dense reward (the fraction of
positions right) so every group has something to compare. The agent calls its `llm` resource through the
OpenAI client, as any agent would; it samples at the resource's temperature when training and greedily when
evaluating (`rollout.mode` other than train), so held-out success measures what the policy has learned.
Defined at module level so runner processes can import it; it imports no torch.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from typing import Any

import openai

from agl_events.agent import rollout
from agl_events.types import LLM, Rollout

DIGITS = 3


def reverse_tasks(count: int, seed: int, exclude: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """`count` tasks of three random digits, the same for the same seed; none of them among `exclude` (a
    held-out split), so training never sees a held-out task."""
    rng, held_out = random.Random(seed), {tuple(task["digits"]) for task in exclude}
    if 10**DIGITS - len(held_out) <= 0:
        raise ValueError("no task is left outside the excluded ones")
    tasks: list[dict[str, Any]] = []
    while len(tasks) < count:
        digits = [rng.randrange(10) for _ in range(DIGITS)]
        if tuple(digits) not in held_out:
            tasks.append({"digits": digits})
    return tasks


def prompt_of(task: dict[str, Any]) -> str:
    return " ".join(map(str, task["digits"])) + " ="


def reward_of(task: dict[str, Any], answer: str) -> float:
    """The fraction of positions holding the right digit."""
    return positions_right(answer, [str(d) for d in reversed(task["digits"])])


def positions_right(answer: str, want: Sequence[str]) -> float:
    """The share of `want`'s positions that the words of `answer` match (partial credit, a dense reward)."""
    return sum(a == b for a, b in zip(answer.split(), want, strict=False)) / len(want)


def play(task: dict[str, Any], ask: Callable[[str, int], str]) -> float:
    """The agent's one turn against `ask(prompt, max_tokens) -> text`; the reward of its answer."""
    return reward_of(task, ask(prompt_of(task), DIGITS + 1))


@functools.cache
def openai_client() -> openai.OpenAI:
    """One client per runner process: building one costs about 20 ms of CPU (its HTTP client and TLS context),
    a tenth of a rollout here; each rollout's per-attempt route is a cheap copy sharing its connections."""
    return openai.OpenAI(base_url="http://unset.invalid/v1", api_key="unused", max_retries=0)


def asker(llm: LLM, rollout: Rollout) -> Callable[[str, int], str]:
    """`ask(prompt, max_tokens) -> text`: one chat call to `llm` through the OpenAI client per turn, at the
    resource's temperature when training and greedily when evaluating."""
    temperature = float(llm.sampling_parameters.get("temperature", 1.0)) if rollout.mode == "train" else 0.0
    client = openai_client().with_options(base_url=llm.endpoint)

    def ask(prompt: str, max_tokens: int) -> str:
        reply = client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": prompt}],
                                               temperature=temperature, max_tokens=max_tokens)
        return reply.choices[0].message.content or ""

    return ask


@rollout
def reverse_agent(task: dict[str, Any], llm: LLM, rollout: Rollout) -> float:
    return play(task, asker(llm, rollout))

"""The multi-turn toy task: name a tool, let the agent run it, then answer from what it printed.

A task is a tool name and three digits ("2 5 9 1 =": tool 2 on 5 9 1). Tool k adds one (mod 10) to the k-th
digit. Call 1 sees the task and must answer the tool's name; the agent runs that tool on the digits in Python
(a word that names no tool: the digits come back unchanged); call 2 sees only what the tool printed
("5 0 1 =") and must write the final answer. One reward, at the end: the share of the final answer's three
positions that are right. Both calls must be learned: call 2 never sees the task, so it can only be right
where the tool was, and the tool's output becomes the answer only once call 2 learns to write it back.

Chance: the untrained policy, greedy, scores a mean reward of 0.08 on the held-out tasks and gets none
exactly right. Copying the digits back after any other tool or word earns at most 2/3, so a held-out share
exactly right of 0.9 means both calls were learned. What lets one reward at the end teach both: call 2
earns partial credit by copying whatever came back (most words name no tool at first, and then the digits
come back unchanged, 2 of 3 positions right), and once it copies, naming the right tool is worth the last
third.

The agent calls its `llm` resource through the OpenAI client (`reverse.asker`), greedily outside training;
`play` is its logic against any `ask(prompt, max_tokens) -> text`, so the one-process recipe bench
(`bench.grpo_recipe --task tools`) runs the same turns. Module level, so runner processes import it; no torch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from agl_events.agent import rollout
from agl_events.demo.reverse import DIGITS, asker, positions_right
from agl_events.types import LLM, Rollout


def _bump(position: int) -> Callable[[list[str]], list[str]]:
    """The tool that adds one (mod 10) to the digit at `position`."""
    return lambda digits: [str((int(d) + 1) % 10) if i == position else d for i, d in enumerate(digits)]


#: Tool name -> what it prints for the digits: tool "k" adds one to the k-th digit. A task's operation word
#: is the name of the tool it needs.
TOOLS: dict[str, Callable[[list[str]], list[str]]] = {str(k + 1): _bump(k) for k in range(DIGITS)}

#: What the model gets to answer: a tool's name (one word and the end of sequence), then the digits.
TOOL_TOKENS, ANSWER_TOKENS = 2, DIGITS + 1



def tool_tasks(count: int, seed: int, exclude: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """`count` tasks (a tool name and three digits), the same for the same seed, none of them in `exclude`."""
    rng, held_out = random.Random(seed), {_key(task) for task in exclude}
    if len(TOOLS) * 10**DIGITS - len(held_out) <= 0:
        raise ValueError("no task is left outside the excluded ones")
    tasks: list[dict[str, Any]] = []
    while len(tasks) < count:
        task = {"tool": rng.choice(sorted(TOOLS)), "digits": [rng.randrange(10) for _ in range(DIGITS)]}
        if _key(task) not in held_out:
            tasks.append(task)
    return tasks


def _key(task: dict[str, Any]) -> tuple[Any, ...]:
    return task["tool"], *task["digits"]


def task_prompt(task: dict[str, Any]) -> str:
    return " ".join([task["tool"], *map(str, task["digits"])]) + " ="


def run_tool(word: str, digits: Sequence[int]) -> list[str]:
    """What the tool named `word` prints for `digits`; nothing when no tool has that name."""
    tool = TOOLS.get(word)
    return [str(d) for d in digits] if tool is None else tool([str(d) for d in digits])


def answer_prompt(output: Sequence[str]) -> str:
    return " ".join([*output, "="])


def wanted(task: dict[str, Any]) -> list[str]:
    """The right final answer: the task's tool applied to its digits."""
    return run_tool(task["tool"], task["digits"])


def play(task: dict[str, Any], ask: Callable[[str, int], str]) -> float:
    """Both turns against `ask`; the reward of the final answer."""
    word = (ask(task_prompt(task), TOOL_TOKENS).split() or [""])[0]
    answer = ask(answer_prompt(run_tool(word, task["digits"])), ANSWER_TOKENS)
    return positions_right(answer, wanted(task))


@rollout
def tool_agent(task: dict[str, Any], llm: LLM, rollout: Rollout) -> float:
    return play(task, asker(llm, rollout))

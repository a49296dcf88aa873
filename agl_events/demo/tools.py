"""The multi-turn toy task: name a tool, let the agent run it, then answer from what it printed.

A task is an operation word and three digits ("2 5 7 1 =": rotate 5 7 1 left). Call 1 sees that prompt and
must answer the tool the operation word names; the agent runs that tool on the digits in Python (no tool by
that name: it prints nothing); call 2 sees only the tool's output ("7 1 5 =") and must write the final
answer. One reward, at the end: the share of the final answer's three positions that are right. Both calls
must be learned: call 2 never sees the task, so without the right tool it cannot answer, and the tool's
output is only the answer once call 2 writes it back.

Chance, measured with the untrained policy, greedy: mean reward about 0.1, exactly right 0 (a random word
is one of the three tools 1 time in 5 at best, and each answer position is right 1 time in 15). The three
tools all permute the digits, so a wrong tool's output still shares a position with the answer now and then:
call 2 learns to copy whichever tool ran before call 1 has learned to pick the right one, which is what lets
one reward at the end teach both calls.

The agent calls its `llm` resource through the OpenAI client, greedily outside training, as `reverse` does;
`play` is its logic against any `ask(prompt, max_tokens) -> text`, so the offline recipe bench runs the same
turns in one process. Defined at module level so runner processes can import it; it imports no torch.
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

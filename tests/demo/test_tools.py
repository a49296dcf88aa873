"""The multi-turn task: two model calls a rollout (name a tool, answer from its output), one reward at the
end, and GRPO giving every call of a rollout that rollout's group advantage."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agl_events.algorithm.grpo import GRPO
from agl_events.demo.tools import TOOLS, play, run_tool, task_prompt, tool_tasks
from agl_events.samples.model import Sample
from agl_events.types import Triplet


def _scripted(*replies: str) -> tuple[list[tuple[str, int]], object]:
    asked: list[tuple[str, int]] = []

    def ask(prompt: str, max_tokens: int) -> str:
        asked.append((prompt, max_tokens))
        return replies[len(asked) - 1]

    return asked, ask


def test_a_rollout_asks_twice_and_the_second_call_sees_only_the_tools_output() -> None:
    task = {"tool": "2", "digits": [5, 9, 1]}
    asked, ask = _scripted("2", "5 0 1")
    assert play(task, ask) == 1.0  # type: ignore[arg-type]
    assert asked == [("2 5 9 1 =", 2), ("5 0 1 =", 4)]  # tool 2 adds one to the second digit (9 -> 0)


@pytest.mark.parametrize(("word", "answer", "reward"), [
    ("1", "6 9 1", 1 / 3),  # the wrong tool: right where neither tool touched
    ("7", "5 9 1", 2 / 3),  # no such tool: the digits come back unchanged
    ("2", "", 0.0),  # the right tool, but no answer written
])
def test_the_reward_is_the_final_answers_share_of_right_positions(word: str, answer: str, reward: float) -> None:
    task = {"tool": "2", "digits": [5, 9, 1]}
    asked, ask = _scripted(word, answer)
    assert play(task, ask) == pytest.approx(reward)  # type: ignore[arg-type]
    assert asked[1][0] == " ".join(run_tool(word, task["digits"])) + " ="


def test_tasks_cover_every_tool_and_the_training_split_leaves_out_the_held_out_one() -> None:
    val = tool_tasks(32, seed=2)
    train = tool_tasks(720, seed=1, exclude=val)
    assert {task_prompt(t) for t in train}.isdisjoint(task_prompt(t) for t in val)
    assert {t["tool"] for t in train} == set(TOOLS) and train == tool_tasks(720, seed=1, exclude=val)


def test_grpo_gives_each_call_of_a_rollout_the_rollouts_group_advantage() -> None:
    def sample(n: int, reward: float) -> Sample:
        calls = [Triplet(prompt={"token_ids": [1, 4 + n]}, response={"token_ids": [5 + k], "logprobs": [-1.0]})
                 for k in range(2)]
        return Sample(sample_id=f"s{n}", rollout_id=f"r{n}", attempt_id=None, group_id="g", status="succeeded",
                      final_reward=reward, adapter="test", triplets=calls)

    tokens = GRPO()._tokens([[sample(0, 1.0), sample(1, 0.0)]])
    assert tokens.prompts == [[1, 4], [1, 4], [1, 5], [1, 5]]  # two transitions per rollout
    assert tokens.advantages == pytest.approx([1.0, 1.0, -1.0, -1.0], abs=1e-5)  # (r - mean) / (std + eps)


def test_the_cli_names_the_tasks_and_refuses_an_unknown_one_before_any_broker() -> None:
    done = subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", "localhost:1", "demo", "--task", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no task 'nope': one of reverse, tools" in done.stderr

"""GRPO's recipe on the toy task, in one process (no Kafka): how steady is learning over sampling seeds?

    python -m agl_events.bench.grpo_recipe [--task reverse] [--seeds 6] [--first-seed 0] [--steps 90]
        [--lr 3e-3] [--group-size 8] [--prompts 8] [--epochs 2] [--eval-every 10] [--train-tasks 64]
        [--entropy-coef 0] [--lag 0]

The loop the demo runs through Kafka, minus Kafka: the same tasks, the same policy and sampling as the
policy server (chat template, temperature, token budgets), the agent's turns (`DemoTask.play`), the same
`GRPO` update (its `_tokens` and `_update`), held-out mean reward / share exactly right decoded greedily every
`--eval-every` steps. A live run's samples carry exactly the
logprobs these weights give, so a recipe that is steady here is steady in the demo; what differs is only
which tokens each seed happens to draw. `--lag k` samples each step from the weights k updates old (every
batch exactly k versions behind, the pipelined loop's worst case under `max_staleness=k`, trained with its
decoupled update). Prints each seed's curve, then the spread at the end as JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections import deque
from collections.abc import Callable
from itertools import cycle, islice
from typing import Any

import torch

from agl_events.algorithm.grpo import GRPO
from agl_events.demo.tasks import TASKS, DemoTask
from agl_events.policy.model import Policy
from agl_events.samples.model import Sample
from agl_events.types import Triplet


def _asker(grpo: GRPO, policy: Policy, temperature: float, generator: torch.Generator, calls: list[Triplet]
           ) -> Callable[[str, int], str]:
    """`ask(prompt, max_tokens) -> text` as the policy server answers it, each call kept as a triplet."""
    tokenizer = grpo.tokenizer

    def ask(prompt: str, max_tokens: int) -> str:
        prompt_ids = list(tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                        add_generation_prompt=True, tokenize=True,
                                                        return_dict=True)["input_ids"])
        ids, logprobs, _ = policy.sample(prompt_ids, max_tokens, temperature=temperature,
                                         eos_id=tokenizer.eos_token_id, generator=generator)
        calls.append(Triplet(prompt={"token_ids": prompt_ids}, response={"token_ids": ids, "logprobs": logprobs}))
        return tokenizer.decode(ids, skip_special_tokens=True)

    return ask


def _evaluate(grpo: GRPO, task: DemoTask, policy: Policy, val: list[dict[str, Any]],
              generator: torch.Generator) -> tuple[float, float]:
    """Held-out mean reward and share exactly right, decoded greedily."""
    rewards = [task.play(item, _asker(grpo, policy, 0.0, generator, [])) for item in val]
    return sum(rewards) / len(rewards), sum(r == 1.0 for r in rewards) / len(rewards)


def run_seed(grpo: GRPO, seed: int, eval_every: int, train_tasks: int = 64, task: DemoTask = TASKS["reverse"],
             lag: int = 0) -> list[tuple[int, float, float]]:
    """Held-out (step, mean reward, exact) after 0, `eval_every`, ... `grpo.steps` steps, sampling with `seed`
    from the weights `lag` updates behind (the initial ones until there are that many)."""
    policy = Policy(grpo.policy_config)  # the demo's initial weights (PolicyConfig.seed)
    sampler = Policy(grpo.policy_config) if lag else policy
    versions = deque([copy.deepcopy(policy.state_dict())], maxlen=lag + 1)
    optimizer = torch.optim.Adam(policy.parameters(), lr=grpo.lr)
    generator = torch.Generator().manual_seed(seed)
    val = task.make_tasks(32, 2, ())
    tasks = cycle(task.make_tasks(train_tasks, 1, val))
    curve = [(0, *_evaluate(grpo, task, policy, val, generator))]
    for step in range(1, grpo.steps + 1):
        if lag:
            sampler.load_state_dict(versions[0])
        groups = []
        for n, item in enumerate(islice(tasks, grpo.prompts_per_step)):
            group = []
            for k in range(grpo.group_size):
                calls: list[Triplet] = []
                reward = task.play(item, _asker(grpo, sampler, grpo.temperature, generator, calls))
                group.append(Sample(sample_id=f"{step}-{n}-{k}", rollout_id=f"{step}-{n}-{k}", attempt_id=None,
                                    group_id=f"{step}-{n}", status="succeeded", final_reward=reward, adapter="sim",
                                    triplets=calls))
            groups.append(group)
        grpo._update(policy, optimizer, grpo._tokens(groups))
        versions.append(copy.deepcopy(policy.state_dict()))
        if step % eval_every == 0 or step == grpo.steps:
            curve.append((step, *_evaluate(grpo, task, policy, val, generator)))
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="reverse")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--train-tasks", type=int, default=64)
    parser.add_argument("--entropy-coef", type=float, default=0.0)
    parser.add_argument("--lag", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    finals = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        grpo = GRPO(steps=args.steps, prompts_per_step=args.prompts, group_size=args.group_size, lr=args.lr,
                    epochs=args.epochs, entropy_coef=args.entropy_coef, max_staleness=args.lag)
        started = time.perf_counter()
        curve = run_seed(grpo, seed, args.eval_every, args.train_tasks, TASKS[args.task], args.lag)
        finals.append(curve[-1][1])
        print(f"seed {seed}: " + " ".join(f"{step}:{reward:.2f}/{exact:.2f}" for step, reward, exact in curve)
              + f"  ({time.perf_counter() - started:.0f} s)", flush=True)
    print(json.dumps({"task": args.task, "steps": args.steps, "lr": args.lr, "group_size": args.group_size,
                      "prompts": args.prompts,
                      "epochs": args.epochs, "train_tasks": args.train_tasks,
                      "entropy_coef": args.entropy_coef, "lag": args.lag,
                      "final_min": min(finals), "final_max": max(finals),
                      "final_mean": sum(finals) / len(finals), "at_least_0.9": sum(f >= 0.9 for f in finals)}))


if __name__ == "__main__":
    main()

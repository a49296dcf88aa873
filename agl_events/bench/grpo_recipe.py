"""GRPO's recipe on the toy task, in one process (no Kafka): how steady is learning over sampling seeds?

    python -m agl_events.bench.grpo_recipe [--seeds 6] [--steps 90] [--lr 3e-3] [--group-size 8]
        [--prompts 8] [--epochs 2] [--eval-every 10] [--train-tasks 64]
        [--entropy-coef 0]

The loop the demo runs through Kafka, minus Kafka: the same tasks, the same policy and sampling as the
policy server (chat template, temperature, 4 tokens), the same `GRPO` update (its `_tokens` and `_update`),
held-out mean reward decoded greedily every `--eval-every` steps. A live run's samples carry exactly the
logprobs these weights give, so a recipe that is steady here is steady in the demo; what differs is only
which tokens each seed happens to draw. Prints each seed's curve, then the spread at the end as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from itertools import cycle, islice
from typing import Any

import torch

from agl_events.algorithm.grpo import GRPO
from agl_events.demo.reverse import DIGITS, prompt_of, reverse_tasks, reward_of
from agl_events.policy.model import Policy
from agl_events.samples.model import Sample
from agl_events.types import Triplet


def _answer(grpo: GRPO, policy: Policy, task: dict[str, Any], temperature: float, generator: torch.Generator
            ) -> tuple[list[int], list[int], list[float], float]:
    tokenizer = grpo.tokenizer
    prompt = list(tokenizer.apply_chat_template([{"role": "user", "content": prompt_of(task)}],
                                                add_generation_prompt=True, tokenize=True, return_dict=True)
                  ["input_ids"])
    ids, logprobs, _ = policy.sample(prompt, DIGITS + 1, temperature=temperature, eos_id=tokenizer.eos_token_id,
                                     generator=generator)
    return prompt, ids, logprobs, reward_of(task, tokenizer.decode(ids, skip_special_tokens=True))


def _evaluate(grpo: GRPO, policy: Policy, val: list[dict[str, Any]], generator: torch.Generator) -> float:
    return sum(_answer(grpo, policy, task, 0.0, generator)[3] for task in val) / len(val)


def run_seed(grpo: GRPO, seed: int, eval_every: int, train_tasks: int = 64) -> list[tuple[int, float]]:
    """Held-out mean reward after 0, `eval_every`, ... `grpo.steps` steps, sampling with `seed`."""
    policy = Policy(grpo.policy_config)  # the demo's initial weights (PolicyConfig.seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=grpo.lr)
    generator = torch.Generator().manual_seed(seed)
    val = reverse_tasks(32, seed=2)
    train = reverse_tasks(train_tasks, seed=1, exclude=val)
    tasks = cycle(train)
    curve = [(0, _evaluate(grpo, policy, val, generator))]
    for step in range(1, grpo.steps + 1):
        groups = []
        for n, task in enumerate(islice(tasks, grpo.prompts_per_step)):
            group = []
            for k in range(grpo.group_size):
                prompt, ids, logprobs, reward = _answer(grpo, policy, task, grpo.temperature, generator)
                triplet = Triplet(prompt={"token_ids": prompt}, response={"token_ids": ids, "logprobs": logprobs})
                group.append(Sample(sample_id=f"{step}-{n}-{k}", rollout_id=f"{step}-{n}-{k}", attempt_id=None,
                                    group_id=f"{step}-{n}", status="succeeded", final_reward=reward, adapter="sim",
                                    triplets=[triplet]))
            groups.append(group)
        grpo._update(policy, optimizer, grpo._tokens(groups))
        if step % eval_every == 0 or step == grpo.steps:
            curve.append((step, _evaluate(grpo, policy, val, generator)))
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--train-tasks", type=int, default=64)
    parser.add_argument("--entropy-coef", type=float, default=0.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    finals = []
    for seed in range(args.seeds):
        grpo = GRPO(steps=args.steps, prompts_per_step=args.prompts, group_size=args.group_size, lr=args.lr,
                    epochs=args.epochs, entropy_coef=args.entropy_coef)
        started = time.perf_counter()
        curve = run_seed(grpo, seed, args.eval_every, args.train_tasks)
        finals.append(curve[-1][1])
        print(f"seed {seed}: " + " ".join(f"{step}:{reward:.2f}" for step, reward in curve)
              + f"  ({time.perf_counter() - started:.0f} s)", flush=True)
    print(json.dumps({"steps": args.steps, "lr": args.lr, "group_size": args.group_size, "prompts": args.prompts,
                      "epochs": args.epochs, "train_tasks": args.train_tasks,
                      "entropy_coef": args.entropy_coef, "final_min": min(finals), "final_max": max(finals),
                      "final_mean": sum(finals) / len(finals), "at_least_0.9": sum(f >= 0.9 for f in finals)}))


if __name__ == "__main__":
    main()

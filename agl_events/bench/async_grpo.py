"""Synchronous against pipelined GRPO on the demo task, through Kafka, side by side.

    python -m agl_events.bench.async_grpo [--staleness 0 1] [--steps 90] [--eval-every 5] [--target 0.9]
        [--runners 4] [--concurrency 1 4] [--policy demo learner]

For each `max_staleness`, one run of the demo (`agl_events.demo.learn`'s recipe: 8 prompts x 8 samples a
step, the same tasks and held-out set) in an experiment of its own on the configured broker (the local one is
started if needed). Prints, per run: training steps per second, the wall-clock from the start of `fit` to the
first held-out evaluation at or above `--target` mean reward (evaluations every `--eval-every` steps, so it is
known to that granularity; `-` if never) and the same from the end of the first evaluation (`trained s`: the
start-up of store, runners and servers and the step-0 evaluation cost every mode alike, and are not what
pipelining overlaps), the final held-out mean reward, and the groups the pipelined loop gave up as too stale.
Then the same figures as one JSON line. A benchmark, not a test: the figures depend on the machine and its load.

`--concurrency` is each runner's rollouts at once (`Trainer(runner_concurrency=...)`); the demo runs 1, the
default here. Other values are an added configuration, printed in a column of their own: the demo's agent
mostly waits on its model call, so a runner running one rollout at a time idles outside its attempts (claim,
finish) whatever the loop does, and concurrency is what fills that, in both loops.

`--policy` is the policy's size, a preset name or `D_MODEL,LAYERS[,HEADS]` (`PolicySize.parse`); the demo's
(`demo`: d_model 32, 2 layers, 27k parameters) is the default. Its learner is 2-3% of a synchronous step, so
pipelining has nothing to overlap but the step's tail. `learner` is an added configuration whose learner
(train, commit, load and publish) is a large share of a synchronous step, as a real model's update is: what
pipelining can overlap. A size carries its learning rate (`--lr` sets it for sizes given as numbers). Each
row prints the size, the median seconds per step and the learner's share of it (`StepStats.busy_seconds`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from statistics import median

from agl_events.algorithm.grpo import GRPO, Evaluation
from agl_events.bench.occupancy import busy_share
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.demo.learn import ENTROPY_COEF, EPOCHS, GROUP_SIZE, LEARNING_RATE, PROMPTS_PER_STEP
from agl_events.demo.reverse import reverse_agent, reverse_tasks
from agl_events.policy.model import PolicyConfig
from agl_events.policy.tokenizer import make_tokenizer
from agl_events.store.readonly import ReadOnlyStore
from agl_events.trainer import Trainer


@dataclass(frozen=True)
class PolicySize:
    """The policy's shape and the learning rate it trains at; `name` labels it in the figures."""

    name: str
    d_model: int
    layers: int
    heads: int
    lr: float

    @classmethod
    def parse(cls, text: str, lr: float = LEARNING_RATE) -> PolicySize:
        """A preset's name (`SIZES`), or `D_MODEL,LAYERS[,HEADS]` trained at `lr` (heads default to one per
        64 dimensions, at least 2: attention splits d_model evenly over them)."""
        if text in SIZES:
            return SIZES[text]
        try:
            numbers = [int(part) for part in text.split(",")]
        except ValueError:
            numbers = []
        if len(numbers) not in (2, 3) or min(numbers) < 1:
            raise ValueError(f"a policy size is one of {', '.join(SIZES)} or D_MODEL,LAYERS[,HEADS], not {text!r}")
        d_model, layers = numbers[:2]
        heads = numbers[2] if len(numbers) == 3 else max(2, d_model // 64)
        if d_model % heads:
            raise ValueError(f"d_model {d_model} does not split evenly over {heads} heads")
        return cls(f"{d_model}x{layers}", d_model, layers, heads, lr)

    def config(self) -> PolicyConfig:
        return PolicyConfig(vocab_size=len(make_tokenizer()), d_model=self.d_model, layers=self.layers,
                            heads=self.heads)


#: `demo`: the demo's policy and recipe. `learner`: the added configuration, a learner that is a large share of
#: a synchronous step (docs/performance.md, "Pipelined training"), at the learning rate measured for its width.
SIZES = {"demo": PolicySize("demo", 32, 2, 2, LEARNING_RATE),
         "learner": PolicySize("learner", 512, 4, 8, 3e-4)}


@dataclass(frozen=True)
class RunFigures:
    policy: str
    max_staleness: int
    concurrency: int
    seed: int
    steps: int
    seconds: float
    steps_per_s: float
    rollouts_per_s: float
    seconds_to_target: float | None
    trained_seconds_to_target: float | None
    step_at_target: int | None
    final_reward: float
    trainer_idle: float
    runner_idle: float
    groups_trained: int
    groups_dropped: int
    stale_samples: int
    step_seconds: float
    learner_share: float


def run_once(settings: Settings, max_staleness: int, seed: int, steps: int, eval_every: int, target: float,
             runners: int, concurrency: int = 1, size: PolicySize = SIZES["demo"]) -> RunFigures:
    """One demo run at `max_staleness` with initial weights `seed`, in a new experiment; times measured from
    the start of `fit`, and from the end of the first (step 0) evaluation. The trainer is busy from a batch in
    hand to its version published (`StepStats`), a runner slot (`runners` x `concurrency`) from an attempt's
    start to its end (the rollouts' latest attempts in the run's view). A step's seconds are the median
    between two published versions (an evaluation falls between a few of them); the learner's share is the
    mean busy seconds over that."""
    reached: list[tuple[float, int]] = []
    first_eval: list[float] = []
    published: list[float] = []

    def on_eval(point: Evaluation) -> None:
        if not first_eval:
            first_eval.append(time.perf_counter() - started)
        if point.mean_reward >= target and not reached:
            reached.append((time.perf_counter() - started, point.step))

    grpo = GRPO(steps=steps, prompts_per_step=PROMPTS_PER_STEP, group_size=GROUP_SIZE, lr=size.lr,
                epochs=EPOCHS, entropy_coef=ENTROPY_COEF, eval_every=eval_every, max_staleness=max_staleness,
                policy=size.config(), seed=seed, on_eval=on_eval,
                on_step=lambda _step, _reward: published.append(time.perf_counter()))
    experiment = f"{settings.experiment}-async{max_staleness}s{seed}{size.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    root = Path(tempfile.mkdtemp(prefix="agl-async-grpo-"))
    try:
        trainer = Trainer(grpo, n_runners=runners, adapter={"llm_call_match": "litellm_request"},
                          settings=settings.model_copy(update={"experiment": experiment, "home": root}),
                          view_dir=root / "view", progress=False, runner_concurrency=concurrency)
        val = reverse_tasks(32, seed=2)
        started, began = time.perf_counter(), time.time()
        trainer.fit(reverse_agent, reverse_tasks(steps * PROMPTS_PER_STEP, seed=1, exclude=val), val_dataset=val)
        seconds, ended = time.perf_counter() - started, time.time()
        attempts, rollouts = asyncio.run(_attempt_times(root / "view"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    at = reached[0] if reached else (None, None)
    trained = None if at[0] is None else at[0] - first_eval[0]
    step_seconds = median(b - a for a, b in pairwise(published))
    return RunFigures(size.name, max_staleness, concurrency, seed, steps, seconds, steps / seconds,
                      rollouts / seconds, at[0], trained, at[1], grpo.history[-1].mean_reward,
                      1.0 - busy_share(((0.0, r.busy_seconds) for r in grpo.records), 1, 0.0, seconds),
                      1.0 - busy_share(attempts, runners * concurrency, began, ended),
                      grpo.in_flight.trained, grpo.in_flight.dropped,
                      grpo.records[-1].stale_samples if grpo.records else 0, step_seconds,
                      _mean([r.busy_seconds for r in grpo.records]) / step_seconds)


async def _attempt_times(view: Path) -> tuple[list[tuple[float, float | None]], int]:
    """(start, end) of every attempt in the view the run's store left, and how many rollouts it holds."""
    store = ReadOnlyStore.open(view)
    try:
        rollouts = await store.query_rollouts()
        return [(a.start_time, a.end_time) for r in rollouts for a in await store.query_attempts(r.rollout_id)
                ], len(rollouts)
    finally:
        await store.close()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _to_target(mine: list[RunFigures], base: list[RunFigures], base_k: int) -> str:
    """Mean seconds to the target from `fit`'s start and from the first evaluation's end, each with its ratio
    to `base`'s (the synchronous runs), when every run of both reached it."""
    parts = []
    for name, of in (("s", lambda r: r.seconds_to_target), ("trained s", lambda r: r.trained_seconds_to_target)):
        times, base_times = [of(r) for r in mine], [of(r) for r in base]
        if None in times or None in base_times:
            parts.append(f"{name} to target: not every seed reached it")
        else:
            parts.append(f"mean {_mean(times):.0f} {name} to target, {_mean(times) / _mean(base_times):.2f} of "
                         f"max_staleness={base_k}'s")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1],
                        help="rollouts at once per runner; the demo's is 1, others are an added configuration")
    parser.add_argument("--policy", nargs="+", default=["demo"],
                        help=f"policy sizes: {', '.join(SIZES)} or D_MODEL,LAYERS[,HEADS]; the demo's is demo, "
                             "others are an added configuration")
    parser.add_argument("--lr", type=float, default=LEARNING_RATE, help="learning rate of sizes given as numbers")
    args = parser.parse_args()
    try:
        sizes = [PolicySize.parse(text, args.lr) for text in args.policy]
    except ValueError as exc:
        parser.error(str(exc))
    settings = Settings.from_env()
    settings = settings.model_copy(update={"bootstrap": ensure_broker(settings)})
    runs = []
    for seed in args.seeds:  # seeds outer, so a drift in the machine's load spreads over every staleness
        for size in sizes:
            for c in args.concurrency:
                for k in args.staleness:
                    runs.append(run_once(settings, k, seed, args.steps, args.eval_every, args.target, args.runners,
                                         c, size))
                    print(f"policy={size.name} max_staleness={k} concurrency={c} seed={seed} done in "
                          f"{runs[-1].seconds:.0f} s", flush=True)
    print(f"{'policy':>7} {'staleness':>9} {'conc':>4} {'seed':>4} {'s/step':>6} {'learner':>7} {'steps/s':>7} "
          f"{'rollouts/s':>10} {'s to ' + str(args.target):>8} {'trained s':>9} {'(step)':>6} {'final':>5} "
          f"{'trainer idle':>12} {'runner idle':>11} {'dropped':>7} {'stale smp':>9}")
    for r in runs:
        print(f"{r.policy:>7} {r.max_staleness:>9} {r.concurrency:>4} {r.seed:>4} {r.step_seconds:>6.2f} "
              f"{r.learner_share:>7.0%} {r.steps_per_s:>7.3f} {r.rollouts_per_s:>10.1f} "
              f"{_seconds(r.seconds_to_target):>8} {_seconds(r.trained_seconds_to_target):>9} "
              f"{r.step_at_target or '-':>6} {r.final_reward:>5.2f} {r.trainer_idle:>12.0%} {r.runner_idle:>11.0%} "
              f"{r.groups_dropped:>7} {r.stale_samples:>9}")
    for size in sizes:
        for c in args.concurrency:
            label = "the demo's" if c == 1 and size.name == "demo" else "added configuration"
            of = {k: [r for r in runs if (r.policy, r.concurrency, r.max_staleness) == (size.name, c, k)]
                  for k in args.staleness}
            for k, mine in of.items():
                print(f"policy={size.name} concurrency={c} ({label}), max_staleness={k}: "
                      f"{_to_target(mine, of[min(of)], min(of))}, final {_mean([r.final_reward for r in mine]):.2f}, "
                      f"rollouts/s {_mean([r.rollouts_per_s for r in mine]):.1f}, "
                      f"s/step {_mean([r.step_seconds for r in mine]):.2f}, "
                      f"learner {_mean([r.learner_share for r in mine]):.0%} of a step")
    print(json.dumps({"target": args.target, "runs": [asdict(r) for r in runs]}))

if __name__ == "__main__":
    main()

"""Synchronous against pipelined GRPO on the demo task, through Kafka, side by side.

    python -m agl_events.bench.async_grpo [--staleness 0 1] [--steps 90] [--eval-every 5] [--target 0.9]
        [--runners 4]

For each `max_staleness`, one run of the demo (`agl_events.demo.learn`'s recipe: 8 prompts x 8 samples a
step, the same tasks and held-out set) in an experiment of its own on the configured broker (the local one is
started if needed). Prints, per run: training steps per second, the wall-clock from the start of `fit` to the
first held-out evaluation at or above `--target` mean reward (evaluations every `--eval-every` steps, so it is
known to that granularity; `-` if never), the final held-out mean reward, and the groups the pipelined loop
gave up as too stale. Then the same figures as one JSON line. A benchmark, not a test: the figures depend on
the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agl_events.algorithm.grpo import GRPO, Evaluation
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.demo.learn import ENTROPY_COEF, EPOCHS, GROUP_SIZE, LEARNING_RATE, PROMPTS_PER_STEP
from agl_events.demo.reverse import reverse_agent, reverse_tasks
from agl_events.trainer import Trainer


@dataclass(frozen=True)
class RunFigures:
    max_staleness: int
    steps: int
    seconds: float
    steps_per_s: float
    seconds_to_target: float | None
    step_at_target: int | None
    final_reward: float
    groups_trained: int
    groups_dropped: int
    stale_samples: int


def run_once(settings: Settings, max_staleness: int, steps: int, eval_every: int, target: float, runners: int
             ) -> RunFigures:
    """One demo run at `max_staleness`, in a new experiment; times measured from the start of `fit`."""
    reached: list[tuple[float, int]] = []

    def on_eval(point: Evaluation) -> None:
        if point.mean_reward >= target and not reached:
            reached.append((time.perf_counter() - started, point.step))

    grpo = GRPO(steps=steps, prompts_per_step=PROMPTS_PER_STEP, group_size=GROUP_SIZE, lr=LEARNING_RATE,
                epochs=EPOCHS, entropy_coef=ENTROPY_COEF, eval_every=eval_every, max_staleness=max_staleness,
                on_eval=on_eval)
    experiment = f"{settings.experiment}-async{max_staleness}-{time.strftime('%Y%m%d-%H%M%S')}"
    root = Path(tempfile.mkdtemp(prefix="agl-async-grpo-"))
    try:
        trainer = Trainer(grpo, n_runners=runners, adapter={"llm_call_match": "litellm_request"},
                          settings=settings.model_copy(update={"experiment": experiment, "home": root}),
                          view_dir=root / "view", progress=False)
        val = reverse_tasks(32, seed=2)
        started = time.perf_counter()
        trainer.fit(reverse_agent, reverse_tasks(steps * PROMPTS_PER_STEP, seed=1, exclude=val), val_dataset=val)
        seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)
    at = reached[0] if reached else (None, None)
    return RunFigures(max_staleness, steps, seconds, steps / seconds, at[0], at[1], grpo.history[-1].mean_reward,
                      grpo.in_flight.trained, grpo.in_flight.dropped,
                      grpo.records[-1].stale_samples if grpo.records else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--runners", type=int, default=4)
    args = parser.parse_args()
    settings = Settings.from_env()
    settings = settings.model_copy(update={"bootstrap": ensure_broker(settings)})
    runs = []
    for k in args.staleness:
        runs.append(run_once(settings, k, args.steps, args.eval_every, args.target, args.runners))
        print(f"max_staleness={k} done in {runs[-1].seconds:.0f} s", flush=True)
    print(f"{'max_staleness':>13} {'steps/s':>8} {'s to ' + str(args.target):>9} {'(step)':>6} {'final':>6} "
          f"{'trained':>8} {'dropped':>8} {'stale smp':>9} {'total s':>8}")
    for r in runs:
        to_target = "-" if r.seconds_to_target is None else f"{r.seconds_to_target:.0f}"
        print(f"{r.max_staleness:>13} {r.steps_per_s:>8.3f} {to_target:>9} {r.step_at_target or '-':>6} "
              f"{r.final_reward:>6.2f} {r.groups_trained:>8} {r.groups_dropped:>8} {r.stale_samples:>9} "
              f"{r.seconds:>8.0f}")
    print(json.dumps({"target": args.target, "runs": [asdict(r) for r in runs]}))


if __name__ == "__main__":
    main()

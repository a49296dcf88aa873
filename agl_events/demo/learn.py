"""The job `make demo` runs: GRPO teaches the tiny torch policy a demo task (`demo.tasks`; by default to
reverse three digits), through Kafka.

Every rollout, span, sample and weights version passes through the broker: the Trainer hosts the store and
starts runner processes, GRPO starts the policy server and the LLM proxy, runners run the task's agent (an
OpenAI-client agent; `tools`' calls twice a rollout) against the policy through the proxy, the samples worker
turns finished rollouts into samples with token ids and logprobs, and each GRPO step trains on whole groups
and publishes the next weights version. Held-out success is measured greedily through the runners every
`eval_every` steps.

Each run trains a new experiment (`<experiment>-grpo-<time>`): GRPO resumes an experiment that already has
weights versions, and a demo should start from scratch. The learning curve lands in
`<home>/demo/<that experiment>/curve.{png,csv}`; then the view is rebuilt from offset 0 and compared.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agl_events.algorithm.grpo import GRPO, Evaluation
from agl_events.config import Settings
from agl_events.demo.curve import write_curve
from agl_events.demo.run import live_and_rebuilt
from agl_events.demo.tasks import TASKS, DemoTask
from agl_events.trainer import Trainer

PROMPTS_PER_STEP, GROUP_SIZE = 8, 8
#: The default task's recipe (`demo.tasks`), which the pipelined-GRPO benchmark runs too.
LEARNING_RATE, EPOCHS, ENTROPY_COEF = TASKS["reverse"].lr, TASKS["reverse"].epochs, TASKS["reverse"].entropy_coef


@dataclass
class LearnReport:
    experiment: str
    history: list[Evaluation]
    train_rewards: list[float]
    rollouts: int
    seconds: float
    curve: Path
    live_counts: dict[str, int]
    rebuilt_counts: dict[str, int]


def demo_experiment(settings: Settings) -> Settings:
    return settings.model_copy(update={"experiment": f"{settings.experiment}-grpo-{time.strftime('%Y%m%d-%H%M%S')}"})


def run_learning_demo(settings: Settings, steps: int = 90, runners: int = 4, concurrency: int = 8,
                      eval_every: int = 10,
                      on_step: Callable[[int, float], None] | None = None,
                      on_eval: Callable[[Evaluation], None] | None = None,
                      task: DemoTask = TASKS["reverse"]) -> LearnReport:
    """Train `task` for `steps` GRPO steps of 8 prompts x 8 samples in `settings.experiment` with its recipe,
    new training tasks every step (none of them held out), then check the view."""
    root = Path(tempfile.mkdtemp(prefix="agl-demo-"))
    grpo = GRPO(steps=steps, prompts_per_step=PROMPTS_PER_STEP, group_size=GROUP_SIZE, lr=task.lr,
                epochs=task.epochs, entropy_coef=task.entropy_coef, eval_every=eval_every, on_step=on_step,
                on_eval=on_eval)
    trainer = Trainer(grpo, n_runners=runners, adapter=dict(task.adapter), settings=settings,
                      view_dir=root / "live", progress=False, runner_concurrency=concurrency)
    val = task.make_tasks(32, 2, ())
    started = time.perf_counter()
    trainer.fit(task.agent, task.make_tasks(steps * PROMPTS_PER_STEP, 1, val), val_dataset=val)
    seconds = time.perf_counter() - started
    curve = write_curve(settings.home / "demo" / settings.experiment, grpo.train_rewards,
                        [(e.step, e.mean_reward) for e in grpo.history],
                        f"GRPO through Kafka: {task.title} ({settings.experiment})")
    live, rebuilt = live_and_rebuilt(trainer.settings_used, root / "live", root / "rebuilt")
    shutil.rmtree(root, ignore_errors=True)
    return LearnReport(settings.experiment, grpo.history, grpo.train_rewards,
                       steps * PROMPTS_PER_STEP * GROUP_SIZE + len(grpo.history) * len(val), seconds, curve,
                       live, rebuilt)

"""`agl-events demo`: the end-to-end job on the configured (or local) broker."""

from __future__ import annotations

import importlib
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings
from agl_events.config import Settings
from agl_events.demo.run import print_rebuild, print_report, run_demo
from agl_events.demo.tasks import TASKS


class Job(StrEnum):
    grpo = "grpo"
    baseline = "baseline"


def demo(ctx: typer.Context,
         algorithm: Annotated[Job, typer.Option(help="grpo: the policy learns through Kafka (a few minutes); "
                                                     "baseline: the store and runners alone (seconds).")
                              ] = Job.grpo,
         task: Annotated[str, typer.Option(help="What GRPO teaches: reverse (three digits, one LLM call a rollout) or "
                                                "tools (name a tool, then answer from its output: two calls).")
                         ] = "reverse",
         steps: Annotated[int | None, typer.Option(min=1, help="GRPO steps of 8 prompts x 8 samples (default: the "
                                                                 "task's, 90 for reverse, 150 for tools).")] = None,
         rollouts: Annotated[int, typer.Option(min=1, help="Rollouts to enqueue (baseline).")] = 200,
         runners: Annotated[int, typer.Option(min=1, help="Runner processes.")] = 4,
         concurrency: Annotated[int, typer.Option(min=1, help="Rollouts each runner runs at once (grpo): its agent "
                                                              "mostly waits on the policy.")] = 8) -> None:
    """Train an agent end to end through Kafka, then rebuild the view from the log and compare it."""
    if task not in TASKS:  # before a broker is started for it
        raise typer.BadParameter(f"no task {task!r}: one of {', '.join(TASKS)}", param_hint="--task")
    cfg = settings(ctx)
    cfg = cfg.model_copy(update={"bootstrap": ensure_broker(cfg)})
    console = Console()
    where = 'local broker' if cfg.uses_local_broker else 'configured cluster'
    if algorithm is Job.baseline:
        console.print(f"Running the baseline demo on {cfg.bootstrap_servers} ({where}), experiment "
                      f"[bold]{cfg.experiment}[/]")
        report = run_demo(cfg, rollouts=rollouts, runners=runners)
        print_report(report, cfg, console)
        same = report.live_counts == report.rebuilt_counts
    else:
        same = _learn(cfg, task, steps, runners, concurrency, console)
    if not same:
        raise typer.Exit(1)


def _learn(cfg: Settings, task_name: str, steps: int | None, runners: int, concurrency: int, console: Console
           ) -> bool:
    task = TASKS[task_name]
    steps = steps or task.steps
    try:  # torch is the `training` extra: imported only when this job runs, so the CLI starts without it
        learn = importlib.import_module("agl_events.demo.learn")
    except ImportError as exc:
        raise typer.BadParameter(f"the GRPO demo needs the training extra (pip install 'agl-events[training]'): "
                                 f"{exc}", param_hint="--algorithm") from exc
    cfg = learn.demo_experiment(cfg)
    console.print(f"GRPO on {cfg.bootstrap_servers}, experiment [bold]{cfg.experiment}[/]: a 27k-parameter policy "
                  f"learns {task.goal}, {steps} steps of 64 rollouts, every one through Kafka")
    held_out = "held-out: -"
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        bar = progress.add_task("starting runners, proxy and policy server", total=steps)

        def on_eval(point: Any) -> None:
            nonlocal held_out
            held_out = f"held-out {point.mean_reward:.2f} (step {point.step})"
            progress.update(bar, description=f"GRPO steps · {held_out}")

        def on_step(done: int, reward: float) -> None:
            progress.update(bar, completed=done, description=f"GRPO steps · batch reward {reward:.2f} · {held_out}")

        report = learn.run_learning_demo(cfg, steps=steps, runners=runners, concurrency=concurrency,
                                         on_step=on_step, on_eval=on_eval, task=task)
    table = Table(title=f"agl-events demo · GRPO · {task.name} · {cfg.experiment}")
    table.add_column("what")
    table.add_column("value", justify="right")
    first, last = report.history[0], report.history[-1]
    table.add_row("held-out mean reward (greedy)", f"{first.mean_reward:.3f} -> {last.mean_reward:.3f}")
    table.add_row("held-out exactly right", f"{first.exact:.0%} -> {last.exact:.0%}")
    table.add_row("weights versions published", str(len(report.train_rewards) + 1))
    table.add_row("rollouts (training and held-out)", str(report.rollouts))
    table.add_row("wall time", f"{report.seconds:.0f} s ({report.rollouts / report.seconds:.1f} rollouts/s)")
    table.add_row("learning curve", str(report.curve))
    console.print(table)
    print_rebuild(report.live_counts, report.rebuilt_counts, console)
    console.print(f"demo: success {first.exact:.2f} -> {last.exact:.2f} in {report.seconds:.0f}s "
                  f"({report.live_counts['total_rollouts']} rollouts, {report.live_counts['total_spans']} spans, "
                  f"{len(report.train_rewards) + 1} model versions)", highlight=False, soft_wrap=True)
    return bool(report.live_counts == report.rebuilt_counts)

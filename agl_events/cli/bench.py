"""`agl-events bench`: the side-by-side benchmark (agl-events vs Agent Lightning 0.3.0 vs raw Kafka)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from agl_events.bench.workload import PRESETS, WorkloadParams
from agl_events.cli.context import settings


def bench(
    ctx: typer.Context,
    preset: Annotated[str, typer.Option(help="small (a quick look), medium (the reference figures), or agl-minimal, "
                                             "agl-medium, agl-midhigh, agl-large-batch, agl-heavy-traces (Agent "
                                             "Lightning's own store benchmark scenarios).")] = "small",
    rollouts: Annotated[int | None, typer.Option(min=1, help="Rollouts measured (after a warm-up).")] = None,
    runners: Annotated[int | None, typer.Option(min=1, help="Runner processes on each side.")] = None,
    max_rounds: Annotated[int | None, typer.Option(min=1, help="Each rollout does randint(1, max_rounds) rounds.")
                          ] = None,
    batch_size: Annotated[int | None, typer.Option(min=1, help="Rollouts per enqueue_many_rollouts call.")] = None,
    span_sleep: Annotated[float | None, typer.Option(min=0, help="Seconds slept inside each leaf span.")] = None,
    reward_p: Annotated[float | None, typer.Option(min=0, max=1, help="Probability of a reward after a round.")
                        ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the rollouts' shapes (same on both sides).")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Rollouts each of our runners runs at once.")] = None,
    our_runners: Annotated[int | None, typer.Option(min=0, help="Our runner processes (0: as many as --runners).")
                           ] = None,
    venv: Annotated[Path | None, typer.Option(help="Agent Lightning's venv (default: <home>/bench-venv).")] = None,
    raw_messages: Annotated[int | None, typer.Option(min=1, help="Records sent by the raw producer loop.")] = None,
    profile: Annotated[Path | None, typer.Option(
        help="Write py-spy profiles of our store and runners over the measured windows to this folder, and print "
             "their CPU per rollout by part and top frames (py-spy is in the test extra).")] = None,
    scale: Annotated[float, typer.Option(
        min=0.001, help="Run the preset this many times smaller: rollouts, runners and batch size divided, each "
                        "rollout's shape kept (the agl-* presets need it on a small machine); the flags above "
                        "apply after it.")] = 1.0,
    repeat: Annotated[int, typer.Option(
        min=1, help="Rounds of the two sides, alternated (ours, AGL, ours, AGL...); the figures are the round "
                    "with the median ratio, every round's rates are printed too.")] = 1,
    broker_warm_up: Annotated[bool, typer.Option(
        help="First run our side on throwaway experiments until the local broker's JIT compiler takes under 10% of "
             "its CPU in two rounds in a row (up to 8 rounds of 2,000 rollouts): a broker just started spends up to "
             "a third of its CPU compiling, which a broker in service does not.")] = True,
    history_spans: Annotated[int, typer.Option(
        min=0, help="Also measure the store's peak RSS while it rebuilds its view from a history of this many "
                    "spans (1000000 for the reference figure: several minutes).")] = 0,
) -> None:
    """Run the same store workload on agl-events and on Agent Lightning 0.3.0; the last line is JSON."""
    if preset not in PRESETS:
        raise typer.BadParameter(f"preset must be one of {sorted(PRESETS)}", param_hint="--preset")
    given = {"rollouts": rollouts, "runners": runners, "max_rounds": max_rounds, "batch_size": batch_size,
             "span_sleep": span_sleep, "reward_p": reward_p, "seed": seed, "concurrency": concurrency,
             "our_runners": our_runners}
    overrides = {k: v for k, v in given.items() if v is not None}
    params = WorkloadParams.model_validate({**PRESETS[preset].scaled(scale).model_dump(), **overrides})
    cfg = settings(ctx)
    from agl_events.bench import history  # the benchmark's side (servers, agentlightning): imported only to run
    from agl_events.bench.compare import render, run

    summary = run(cfg, params, venv, raw_messages, profile_dir=profile, repeat=repeat, warm_up=broker_warm_up)
    if history_spans:
        Console(stderr=True).print(f"[bold]history[/bold]: rebuilding a store from {history_spans:,} spans…")
        summary.update({k: round(v, 3) for k, v in history.measure(cfg, history_spans).items()})
    render(summary, Console(width=max(Console().width, 110)))
    print(json.dumps(summary), flush=True)

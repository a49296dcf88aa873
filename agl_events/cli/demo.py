"""`agl-events demo`: the end-to-end job on the configured (or local) broker."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from agl_events.cli.context import settings
from agl_events.demo import print_report, run_demo


def demo(ctx: typer.Context,
         rollouts: Annotated[int, typer.Option(min=1, help="How many rollouts to enqueue.")] = 200,
         runners: Annotated[int, typer.Option(min=1, help="How many simulated runners.")] = 4) -> None:
    """Train a small agent with real runner processes (Trainer + Baseline), then rebuild the view from the log."""
    cfg = settings(ctx)
    console = Console()
    console.print(f"Running the demo on {cfg.bootstrap_servers} "
                  f"({'local broker, started if needed' if cfg.uses_local_broker else 'configured cluster'}), "
                  f"experiment [bold]{cfg.experiment}[/]")
    report = run_demo(cfg, rollouts=rollouts, runners=runners)
    print_report(report, cfg, console)
    if report.live_counts != report.rebuilt_counts:
        raise typer.Exit(1)

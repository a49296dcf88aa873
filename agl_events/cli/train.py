"""`agl-events train history`: an experiment's committed training steps, read from its steps topic."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings
from agl_events.samples.step_log import read_steps
from agl_events.samples.steps import StepRecord

train_app = typer.Typer(help="Training steps of an experiment (GRPO's exactly-once step records).",
                        no_args_is_help=True)
console = Console(soft_wrap=True)


def _row(record: StepRecord) -> dict[str, object]:
    return {"step": record.step, "version": record.version, "used": len(record.trained),
            "dropped": len(record.dropped), "mean_reward": record.mean_reward, "time": record.time}


@train_app.command()
def history(ctx: typer.Context,
            as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout instead of a table.")
                               ] = False) -> None:
    """Every committed step: the weights version it wrote, the samples it trained on and those it dropped as
    stale, and their mean reward (`--json`: the same, one document)."""
    cfg = settings(ctx)
    bootstrap = ensure_broker(cfg)  # unreachable: the one-line error every command gives (exit 2)
    try:
        records = read_steps(bootstrap, cfg.experiment)
    except RuntimeError as exc:  # no steps topic: no such experiment, or one made before step records
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps({"experiment": cfg.experiment, "steps": [_row(r) for r in records]}))
        return
    if not records:
        console.print(f"no training steps in experiment {cfg.experiment}")
        raise typer.Exit(1)
    table = Table("step", "version", "samples used", "dropped (stale)", "mean reward", "committed (UTC)",
                  title=f"training steps of {cfg.experiment}")
    for r in records:
        reward = "" if r.mean_reward is None else f"{r.mean_reward:.3f}"
        when = datetime.fromtimestamp(r.time, UTC).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(str(r.step), f"v{r.version}", str(len(r.trained)), str(len(r.dropped)), reward, when)
    console.print(table)

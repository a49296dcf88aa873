"""`agl-events produce tasks FILE.jsonl`: enqueue rollouts in bulk, with a progress bar and a summary."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agl_events.cli.context import settings
from agl_events.produce import ProduceReport, produce_tasks
from agl_events.server.client import StoreClient, StoreUnavailableError, experiment_url

produce_app = typer.Typer(help="Put work into an experiment.", no_args_is_help=True)
console = Console(stderr=True, soft_wrap=True)
SHOWN_ERRORS = 20


@produce_app.command()
def tasks(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A JSON-lines file, or - for standard input.")],
    store_url: Annotated[str, typer.Option("--store-url", envvar="AGL_STORE_URL", help="The agl-events store server.")
                         ] = "http://127.0.0.1:4747",
    batch_size: Annotated[int, typer.Option(min=1, max=10_000, help="Rollouts per store call.")] = 500,
) -> None:
    """Enqueue one rollout per line ({"input": ..., "mode"?, "resources_id"?, "config"?, "metadata"?})."""
    cfg = settings(ctx)
    if source == "-":
        lines: list[str] = sys.stdin.read().splitlines()
    else:
        path = Path(source)
        if not path.is_file():
            raise typer.BadParameter(f"no such file: {path}", param_hint="SOURCE")
        lines = path.read_text().splitlines()
    started = time.perf_counter()
    with Progress(TextColumn("enqueuing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        bar = progress.add_task("lines", total=len(lines))
        try:
            report = asyncio.run(_produce(experiment_url(store_url, cfg.experiment), lines, batch_size,
                                          lambda done, _: progress.update(bar, completed=done)))
        except StoreUnavailableError as exc:
            console.print(f"[red]{exc}[/]")
            raise typer.Exit(2) from exc
        progress.update(bar, completed=len(lines))
    _summary(report, time.perf_counter() - started, cfg.experiment)
    if report.rejected:
        raise typer.Exit(1)


async def _produce(url: str, lines: list[str], batch_size: int, on_progress: object) -> ProduceReport:
    client = StoreClient(url)
    try:
        return await produce_tasks(client, lines, batch_size, on_progress)  # type: ignore[arg-type]
    finally:
        await client.close()


def _summary(report: ProduceReport, seconds: float, experiment: str) -> None:
    table = Table(title=f"produce tasks · experiment {experiment}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("lines read", str(report.lines))
    table.add_row("rollouts enqueued", str(len(report.enqueued)))
    table.add_row("lines rejected", str(len(report.rejected)))
    table.add_row("rollouts/s", f"{len(report.enqueued) / max(seconds, 1e-9):.0f}")
    console.print(table)
    for number, why in report.rejected[:SHOWN_ERRORS]:
        console.print(f"[red]line {number}[/]: {why}")
    if len(report.rejected) > SHOWN_ERRORS:
        console.print(f"... and {len(report.rejected) - SHOWN_ERRORS} more rejected lines")

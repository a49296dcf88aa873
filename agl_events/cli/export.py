"""`agl-events replay export`: an experiment's training data as a JSONL or Parquet file, read from its log."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings
from agl_events.config import Settings
from agl_events.log.clients import make_admin
from agl_events.replay.cut import parse_time
from agl_events.replay.export import (
    ExportAdapter,
    ExportCounts,
    ExportFilter,
    FinishedStatus,
    export_rows,
    write_jsonl,
    write_parquet,
)
from agl_events.topics import Topic, topic_name
from agl_events.types import RolloutMode

console = Console(stderr=True, soft_wrap=True)
Format = Literal["jsonl", "parquet"]
SUFFIXES: dict[str, Format] = {".jsonl": "jsonl", ".parquet": "parquet"}


def export(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", "-o", help="The file to write (replaced if it exists).")],
    experiment: Annotated[str | None, typer.Option(
        "--experiment", "-e", show_default="the global --experiment", help="The experiment to export.")] = None,
    since: Annotated[str | None, typer.Option(
        help="Rollouts that ended at or after this (ISO time, UTC unless it says, or seconds since the epoch).")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Rollouts that ended at or before this (as --since).")] = None,
    resources_id: Annotated[str | None, typer.Option(help="Rollouts run with these resources.")] = None,
    mode: Annotated[RolloutMode | None, typer.Option(help="Rollouts of this mode.")] = None,
    min_reward: Annotated[float | None, typer.Option(
        help="Rollouts whose final reward is at least this (rollouts without one are left out).")] = None,
    status: Annotated[FinishedStatus | None, typer.Option(help="Rollouts that ended with this status.")] = None,
    adapter: Annotated[ExportAdapter, typer.Option(
        help="triplet: a row per LLM call, from the spans; messages: a row per rollout, its conversations; "
             "samples: a row per sample the trainer got (the samples topic).")] = "triplet",
    adapter_spec: Annotated[str | None, typer.Option(
        help="The triplet adapter, as `agl-events samples --adapter` takes it (default: TracerTraceToTriplet).")
    ] = None,
    format: Annotated[Format | None, typer.Option(
        "--format", show_default="from the --out suffix", help="jsonl or parquet.")] = None,
) -> None:
    """Export training data from the experiment's history, up to the log's end when it starts.

    Reads the log from its beginning (no store needs to run) in constant memory: a finished rollout's spans
    are let go once its rows are written.
    """
    chosen = format or SUFFIXES.get(out.suffix)
    if chosen is None:
        raise typer.BadParameter(f"cannot tell the format from {out.name!r}: give --format jsonl or parquet "
                                 "(or name the file .jsonl or .parquet)", param_hint="--format")
    try:
        filters = ExportFilter(since=None if since is None else parse_time(since),
                               until=None if until is None else parse_time(until),
                               resources_id=resources_id, mode=mode, min_reward=min_reward, status=status)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since/--until") from exc
    cfg = _experiment_settings(settings(ctx), experiment)
    counts = ExportCounts()
    progress = Progress(TextColumn(f"reading {cfg.experiment}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("records"), TimeElapsedColumn(), console=console)
    bar = progress.add_task("records", total=None)
    try:
        rows = export_rows(cfg, adapter, filters, adapter_spec=adapter_spec, counts=counts,
                           progress=lambda done, total: progress.update(bar, completed=done, total=total))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--adapter-spec") from exc
    _topic_exists(cfg, Topic.SAMPLES if adapter == "samples" else Topic.SPANS)
    started = time.perf_counter()
    with progress:
        written = write_jsonl(rows, out) if chosen == "jsonl" else write_parquet(rows, out, adapter)
    seconds = time.perf_counter() - started
    duplicates = f", {counts.duplicates} duplicate samples" if adapter == "samples" else ""
    typer.echo(f"export: {written} {adapter} rows to {out} from {counts.rollouts} rollouts "
               f"({counts.filtered} skipped by filter, {counts.failed} adapter failures{duplicates}) "
               f"in {seconds:.1f}s, {written / max(seconds, 1e-9):.0f} rows/s")


def _experiment_settings(cfg: Settings, experiment: str | None) -> Settings:
    """The global settings, for `experiment` if given; the bootstrap resolved (the local broker started)."""
    try:
        cfg = cfg if experiment is None else Settings.model_validate({**cfg.model_dump(), "experiment": experiment})
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--experiment") from exc
    return cfg.model_copy(update={"bootstrap": ensure_broker(cfg)})


def _topic_exists(cfg: Settings, topic: Topic) -> None:
    """One red line and exit 1 when the experiment has no such topic (a mistyped --experiment, most likely)."""
    name = topic_name(cfg.experiment, topic)
    if name not in make_admin(cfg.bootstrap_servers).list_topics(timeout=cfg.kafka_timeout).topics:
        console.print(f"[red]experiment {cfg.experiment!r} has no topic {name}: nothing to export[/]")
        raise typer.Exit(1)

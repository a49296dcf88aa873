"""`agl-events experiments list | describe E | delete E`: the experiments a cluster holds, read from the broker.

These commands take the experiment as an argument, not from `--experiment`: they look across experiments,
and a delete should name what it deletes.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.filesize import decimal
from rich.table import Column, Table

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings
from agl_events.log.experiments import (
    ExperimentSummary,
    UnknownExperimentError,
    delete_experiment,
    describe_experiment,
    list_experiments,
)
from agl_events.log.registry import codec_for

experiments_app = typer.Typer(help="The experiments on the cluster: list, describe, delete.", no_args_is_help=True)
console = Console(soft_wrap=True)

AsJson = Annotated[bool, typer.Option("--json", help="One JSON document on stdout instead of tables.")]
Name = Annotated[str, typer.Argument(help="The experiment's name (its topics are agl.<name>.*).")]


@experiments_app.command("list")
def list_(ctx: typer.Context, as_json: AsJson = False) -> None:
    """One row per experiment: topics, partitions, events, size on the brokers, first and last event, model
    versions (resources ids) and the latest one."""
    cfg = settings(ctx)
    found = list_experiments(ensure_broker(cfg), codec_for(cfg.schema_registry_url))
    if as_json:
        typer.echo(json.dumps({"experiments": [s.model_dump(mode="json", exclude={"topics"}) for s in found]}))
        return
    if not found:
        console.print(f"no experiments on {cfg.bootstrap_servers}")
        return
    table = Table(Column("experiment", no_wrap=True), "topics", "partitions", "events", "size", "first event (UTC)",
                  "last event (UTC)", "model versions", "latest resources",
                  title=f"experiments on {cfg.bootstrap_servers}")
    for s in found:
        table.add_row(s.name, str(s.topic_count), str(s.partitions), str(s.events), _size(s.size_bytes),
                      _time(s.first_time), _time(s.last_time), str(s.model_versions), s.latest_resources_id or "")
    console.print(table)


@experiments_app.command()
def describe(ctx: typer.Context, experiment: Name, as_json: AsJson = False) -> None:
    """The experiment's summary, then per topic: partitions, cleanup policy, retention, start and end offsets
    (per partition), records, size and first/last record time. Exit 1 for an experiment with no topics."""
    cfg = settings(ctx)
    summary = _described(ensure_broker(cfg), cfg.schema_registry_url, experiment)
    if as_json:
        typer.echo(summary.model_dump_json())
        return
    console.print(f"experiment [bold]{summary.name}[/]: {summary.topic_count} topics, {summary.partitions} "
                  f"partitions, {summary.events} events, {_size(summary.size_bytes)}, first event "
                  f"{_time(summary.first_time) or '-'}, last {_time(summary.last_time) or '-'} (UTC), "
                  f"{summary.model_versions} model versions"
                  + (f" (latest {summary.latest_resources_id})" if summary.latest_resources_id else ""))
    table = Table(Column("topic", no_wrap=True), "partitions", "cleanup.policy", "retention.ms", "start offsets",
                  "end offsets", "records", "size", "first record (UTC)", "last record (UTC)",
                  title=f"topics agl.{summary.name}.*")
    for t in summary.topics:
        table.add_row(t.name.rpartition(".")[2], str(len(t.partitions)), t.cleanup_policy or "",
                      _retention(t.retention_ms),
                      ",".join(str(p.start) for p in t.partitions), ",".join(str(p.end) for p in t.partitions),
                      str(t.records), _size(t.size_bytes), _time(t.first_time), _time(t.last_time))
    console.print(table)


@experiments_app.command()
def delete(
    ctx: typer.Context,
    experiment: Name,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete the experiment's topics and its local view folder (<home>/views/<name>). Asks first, unless --yes;
    exit 1 when answered no (nothing is deleted) or when there is no such experiment."""
    cfg = settings(ctx)
    bootstrap = ensure_broker(cfg)
    summary = _described(bootstrap, cfg.schema_registry_url, experiment)
    if not yes and not typer.confirm(f"Delete experiment {experiment}: {summary.topic_count} topics, "
                                     f"{summary.events} events?", default=False):
        console.print("nothing deleted")
        raise typer.Exit(1)
    deleted = delete_experiment(bootstrap, experiment, cfg.home / "views")
    for name in deleted.topics:
        console.print(f"deleted topic {name}")
    if deleted.views is not None:
        console.print(f"deleted view folder {deleted.views}")
    console.print(f"experiment {experiment} deleted ({len(deleted.topics)} topics, {summary.events} events)")


def _described(bootstrap: str, registry_url: str | None, experiment: str) -> ExperimentSummary:
    """The experiment's summary; an unknown one is one line and exit 1."""
    try:
        return describe_experiment(bootstrap, codec_for(registry_url), experiment)
    except UnknownExperimentError:
        console.print(f"[red]no experiment {experiment} on {bootstrap}[/] (no topic agl.{experiment}.*)")
        raise typer.Exit(1) from None


def _size(size_bytes: int | None) -> str:
    return "n/a" if size_bytes is None else decimal(size_bytes)


def _time(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S") if when is not None else ""


def _retention(millis: int | None) -> str:
    return "" if millis is None else "forever" if millis < 0 else str(millis)

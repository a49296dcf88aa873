"""`agl-events produce tasks FILE.jsonl` and `produce status`: put work into an experiment, see what became of it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import DEFAULT_STORE_URL, AuthToken, StoreUrl, ask_store, settings
from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin, make_producer
from agl_events.produce.lines import ProduceReport
from agl_events.produce.status import TopicMissingError, ingest_progress
from agl_events.produce.to_kafka import produce_to_topic
from agl_events.produce.via_store import produce_via_store
from agl_events.server.client import StoreClient, experiment_url
from agl_events.topics import Topic, topic_name

produce_app = typer.Typer(help="Put work into an experiment, and see what became of it.", no_args_is_help=True)
console = Console(stderr=True, soft_wrap=True)
SHOWN_ERRORS = 20
Progressed = Callable[[int, int], None]


@produce_app.command()
def tasks(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A JSON-lines file, or - for standard input.")],
    key_field: Annotated[str | None, typer.Option(
        "--key-field", help="The field (dotted path) of each line that is its idempotency key; "
                            "default: a hash of the line.")] = None,
    via_store: Annotated[bool, typer.Option(
        "--via-store", help="Enqueue through the store's HTTP API instead of the task-requests topic.")] = False,
    store_url: StoreUrl = DEFAULT_STORE_URL,
    batch_size: Annotated[int, typer.Option(min=1, max=10_000, help="Rollouts per store call (--via-store).")
                          ] = 500,
    auth_token: AuthToken = None,
) -> None:
    """One task per line ({"input": ..., "mode"?, "resources_id"?, "config"?, "metadata"?}).

    By default each line is a record on the experiment's task-requests topic, keyed by its idempotency key:
    no store has to run, and the store enqueues each key once whenever it ingests them.
    """
    cfg = settings(ctx, auth_token)
    if via_store and key_field is not None:
        raise typer.BadParameter("the store's enqueue API takes no idempotency key", param_hint="--key-field")
    lines = _read(source)
    bootstrap = None if via_store else _task_requests_ready(cfg)  # before the bar: an error is then one line
    started = time.perf_counter()
    with Progress(TextColumn("enqueuing" if via_store else "producing (acknowledged)"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("lines", total=len(lines))

        def on_progress(done: int, _: int) -> None:
            progress.update(bar, completed=done)

        if bootstrap is None:
            report = _via_store(experiment_url(store_url, cfg.experiment), cfg.store_token, lines, batch_size,
                                on_progress)
        else:
            report = _to_kafka(bootstrap, cfg.experiment, lines, key_field, on_progress)
        progress.update(bar, completed=len(lines))
    _summary(report, time.perf_counter() - started, cfg.experiment, via_store)
    if not report.ok:
        raise typer.Exit(1)


def _read(source: str) -> list[str]:
    if source == "-":
        return sys.stdin.read().splitlines()
    path = Path(source)
    if not path.is_file():
        raise typer.BadParameter(f"no such file: {path}", param_hint="SOURCE")
    return path.read_text().splitlines()


def _via_store(url: str, token: str | None, lines: list[str], batch_size: int, on_progress: Progressed
               ) -> ProduceReport:
    return ask_store(url, lambda client: produce_via_store(client, lines, batch_size, on_progress), console, token)


def _task_requests_ready(cfg: Settings) -> str:
    """The bootstrap servers, once the cluster answers and the experiment's task-requests topic exists."""
    bootstrap = ensure_broker(cfg)
    admin = make_admin(bootstrap)
    if topic_name(cfg.experiment, Topic.TASK_REQUESTS) not in admin.list_topics(timeout=cfg.kafka_timeout).topics:
        create_topics(admin, cfg.experiment)  # a first produce before any store ran: lay the experiment out
        console.print(f"created the topics of experiment {cfg.experiment}")
    return bootstrap


def _to_kafka(bootstrap: str, experiment: str, lines: list[str], key_field: str | None,
              on_progress: Progressed) -> ProduceReport:
    producer = make_producer(bootstrap, f"produce-tasks-{experiment}")
    try:
        return produce_to_topic(producer, topic_name(experiment, Topic.TASK_REQUESTS), lines, key_field, on_progress)
    finally:
        producer.close()


def _summary(report: ProduceReport, seconds: float, experiment: str, via_store: bool) -> None:
    table = Table(title=f"produce tasks · experiment {experiment}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("lines read", str(report.lines))
    accepted = "rollouts enqueued" if via_store else "task requests acknowledged"
    table.add_row(accepted, str(report.accepted))
    table.add_row("lines rejected", str(len(report.rejected)))
    if report.failed:
        table.add_row("lines Kafka refused", str(len(report.failed)))
    table.add_row("rollouts/s" if via_store else "requests/s", f"{report.accepted / max(seconds, 1e-9):.0f}")
    console.print(table)
    for what, problems in (("", report.rejected), ("not produced: ", report.failed)):
        for number, why in problems[:SHOWN_ERRORS]:
            console.print(f"[red]line {number}[/]: {what}{why}")
        if len(problems) > SHOWN_ERRORS:
            console.print(f"... and {len(problems) - SHOWN_ERRORS} more")
    if not via_store and report.accepted:
        console.print("the store enqueues them as it ingests the topic; `agl-events produce status` shows how far")


@produce_app.command()
def status(
    ctx: typer.Context,
    keys: Annotated[list[str] | None, typer.Option(
        "--key", help="An idempotency key to look up in the store (repeatable).")] = None,
    store_url: StoreUrl = DEFAULT_STORE_URL,
    auth_token: AuthToken = None,
) -> None:
    """How many produced task requests the store has ingested (from Kafka), and what given keys became."""
    cfg = settings(ctx, auth_token)
    try:
        partitions = ingest_progress(ensure_broker(cfg), cfg.experiment, cfg.kafka_timeout)
    except TopicMissingError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from exc
    out = Console()
    table = Table("partition", "produced", "ingested", "pending", title=f"task requests · experiment {cfg.experiment}")
    for p in partitions:
        table.add_row(str(p.partition), str(p.produced), str(p.ingested), str(p.pending))
    table.add_row("all", *(str(sum(getattr(p, f) for p in partitions)) for f in ("produced", "ingested", "pending")))
    out.print(table)
    if keys:
        out.print(_key_table(experiment_url(store_url, cfg.experiment), cfg.store_token, keys))


def _key_table(url: str, token: str | None, keys: list[str]) -> Table:
    async def lookup(client: StoreClient) -> list[tuple[str, str, str]]:
        rows = []
        for key in keys:
            rollout = await client.task_request(key)
            rows.append((key, rollout.rollout_id, rollout.status) if rollout else (key, "-", "not ingested"))
        return rows

    rows = ask_store(url, lookup, console, token)
    table = Table("key", "rollout", "status", title="task requests by key")
    for row in rows:
        table.add_row(*row)
    return table

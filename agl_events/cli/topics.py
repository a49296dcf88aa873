"""`agl-events topics create|describe`: the experiment's topic layout on the cluster."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings
from agl_events.log.admin import broker_ids, create_topics, replication_of
from agl_events.log.clients import make_admin
from agl_events.topics import LAYOUT, Replication, replication_for

topics_app = typer.Typer(help="Create and describe the experiment's topics.", no_args_is_help=True)
console = Console()


@topics_app.command()
def create(
    ctx: typer.Context,
    replication_factor: Annotated[int | None, typer.Option(
        min=1, help="Copies of each partition (default: min(3, the cluster's brokers)).")] = None,
    min_insync_replicas: Annotated[int | None, typer.Option(
        min=1, help="Copies an acknowledged write is on (default: the factor - 1, at least 1).")] = None,
) -> None:
    """Create the experiment's topics (idempotent: existing ones are left as they are, and a replication that
    differs from the one wanted is reported). The first creation of an experiment's topics decides its
    replication: pass the options here, before any store or `up` lays the experiment out with the defaults."""
    cfg = settings(ctx)
    admin = make_admin(ensure_broker(cfg))
    replication = None
    if replication_factor is not None or min_insync_replicas is not None:
        default = replication_for(replication_factor or len(broker_ids(admin)))
        factor, min_insync = replication_factor or default.factor, min_insync_replicas or default.min_insync
        if min_insync > factor:
            raise typer.BadParameter(f"min.insync.replicas {min_insync} exceeds the replication factor {factor}: "
                                     "every acks=all write would be refused")
        replication = Replication(factor=factor, min_insync=min_insync)
    table = Table("topic", "result", title=f"experiment {cfg.experiment}")
    for name, result in sorted(create_topics(admin, cfg.experiment, replication=replication).items()):
        table.add_row(name, result)
    console.print(table)


@topics_app.command()
def describe(ctx: typer.Context) -> None:
    """Show each topic's partitions, replication, settings and purpose, and whether it exists on the cluster.
    Replication is the topic's own where it exists (marked where it differs from the one this cluster's size
    calls for), else the one it would be created with."""
    cfg = settings(ctx)
    admin = make_admin(ensure_broker(cfg))
    existing = admin.list_topics(timeout=15).topics
    wanted = replication_for(len(broker_ids(admin)))
    live_replication = replication_of(admin, [spec.name(cfg.experiment) for spec in LAYOUT])
    table = Table("topic", "key", "partitions", "replication", "config", "exists", "why",
                  title=f"experiment {cfg.experiment} ({wanted} for this cluster)")
    for spec in LAYOUT:
        name = spec.name(cfg.experiment)
        live = existing.get(name)
        partitions = str(len(live.partitions)) if live else str(spec.partitions)
        replicas = live_replication.get(name, wanted)
        shown = f"{replicas.factor} (min.insync {replicas.min_insync})"
        config = ", ".join(f"{k}={v}" for k, v in spec.settings.items())
        table.add_row(name, spec.key, partitions, shown if replicas == wanted else f"[yellow]{shown}, "
                      f"{wanted.factor}/{wanted.min_insync} wanted[/]", config, "yes" if live else "[red]no[/]",
                      spec.why)
    console.print(table)

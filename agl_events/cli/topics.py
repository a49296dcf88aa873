"""`agl-events topics create|describe`: the experiment's topic layout on the cluster."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.topics import LAYOUT

topics_app = typer.Typer(help="Create and describe the experiment's topics.", no_args_is_help=True)
console = Console()


@topics_app.command()
def create(ctx: typer.Context) -> None:
    """Create the experiment's topics (idempotent: existing ones are left as they are)."""
    cfg = settings(ctx)
    admin = make_admin(ensure_broker(cfg))
    table = Table("topic", "result", title=f"experiment {cfg.experiment}")
    for name, result in sorted(create_topics(admin, cfg.experiment).items()):
        table.add_row(name, result)
    console.print(table)


@topics_app.command()
def describe(ctx: typer.Context) -> None:
    """Show each topic's partitions, settings and purpose, and whether it exists on the cluster."""
    cfg = settings(ctx)
    admin = make_admin(ensure_broker(cfg))
    existing = admin.list_topics(timeout=15).topics
    table = Table("topic", "key", "partitions", "config", "exists", "why", title=f"experiment {cfg.experiment}")
    for spec in LAYOUT:
        name = spec.name(cfg.experiment)
        live = existing.get(name)
        partitions = str(len(live.partitions)) if live else str(spec.partitions)
        config = ", ".join(f"{k}={v}" for k, v in spec.settings.items())
        table.add_row(name, spec.key, partitions, config, "yes" if live else "[red]no[/]", spec.why)
    console.print(table)

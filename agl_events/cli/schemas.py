"""`agl-events schemas check|snapshot|register`: keep the event contract backward compatible, and put it in a
Schema Registry; `schemas registry start|stop|status`: a local one (Apicurio Registry) for development."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from agl_events.broker.registry_server import DEFAULT_PORT, RegistryError, RegistryServer
from agl_events.cli.context import settings
from agl_events.config import PROJECT_ROOT
from agl_events.events.compat import check_backward_compatibility, snapshot_history
from agl_events.events.schemas import SCHEMAS_DIR, load_event_schemas

schemas_app = typer.Typer(help="Check and record versions of the event schemas; register them.", no_args_is_help=True)
registry_app = typer.Typer(help="A local Confluent-compatible Schema Registry (Apicurio Registry, fetched with Maven; "
                                "schemas kept in memory).", no_args_is_help=True)
schemas_app.add_typer(registry_app, name="registry")
console = Console()


@schemas_app.command()
def check() -> None:
    """Fail (exit 1) if a current schema cannot read data written with a kept earlier version."""
    problems = check_backward_compatibility(SCHEMAS_DIR)
    for problem in problems:
        console.print(f"[red]incompatible[/] {problem}")
    if problems:
        raise typer.Exit(1)
    console.print(f"[green]ok[/]: every schema in {SCHEMAS_DIR} reads all of its earlier versions")


@schemas_app.command()
def snapshot() -> None:
    """Record each changed schema as a new version under schemas/history/ (run after a compatible change)."""
    if PROJECT_ROOT is None:
        # The history is part of the contract in the repository; an installed copy is not where it is kept.
        console.print(f"[red]snapshot needs a source checkout[/]: this agl-events is installed ({SCHEMAS_DIR}).")
        raise typer.Exit(1)
    problems = check_backward_compatibility(SCHEMAS_DIR)
    if problems:
        for problem in problems:
            console.print(f"[red]incompatible[/] {problem}")
        console.print("Fix these first: a snapshot would record a break in the contract.")
        raise typer.Exit(1)
    written = snapshot_history(SCHEMAS_DIR)
    for path in written:
        console.print(f"kept {path.relative_to(SCHEMAS_DIR.parent)}")
    if not written:
        console.print("nothing changed since the last kept versions")


@schemas_app.command()
def register(
    ctx: typer.Context,
    registry: Annotated[str | None, typer.Option(
        "--registry", help="The registry's Confluent API (default: --schema-registry / AGL_SCHEMA_REGISTRY_URL).",
        show_default=False)] = None,
    compatibility: Annotated[str, typer.Option(
        help="The subjects' compatibility level: BACKWARD, FORWARD, FULL or NONE.")] = "BACKWARD",
) -> None:
    """Register the experiment's event schemas, each new version checked by the registry and by us (exit 1 when
    either refuses one). Subjects: `<topic>-value`, or `<topic>-<record>` on topics with several event kinds."""
    from agl_events.log.registry import COMPATIBILITY_LEVELS, ConfluentRegistry, RegistryRequestError
    from agl_events.log.subjects import register_schemas

    cfg = settings(ctx)
    url = registry or cfg.schema_registry_url
    if not url:
        console.print("[red]no registry[/]: pass --registry URL (or --schema-registry / AGL_SCHEMA_REGISTRY_URL).")
        raise typer.Exit(1)
    level = compatibility.upper()
    if level not in COMPATIBILITY_LEVELS:
        console.print(f"[red]unknown compatibility level {compatibility}[/]: one of {', '.join(COMPATIBILITY_LEVELS)}")
        raise typer.Exit(1)
    try:
        results = register_schemas(ConfluentRegistry(url), load_event_schemas(), cfg.experiment, level)
    except RegistryRequestError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from None
    for result in results:
        if result.schema_id is not None:
            state = "registered" if result.new else "unchanged"
            console.print(f"{state} {result.subject} (id {result.schema_id})")
            continue
        registry_says = "accepts" if result.registry_accepts else "refuses"
        console.print(f"[red]refused[/] {result.subject}: the registry {registry_says} it under {level}; ours "
                      f"{'refuses: ' + '; '.join(result.our_reasons) if result.our_reasons else 'accepts'}"
                      f"{'' if result.agreed else ' (the two checks disagree)'}")
    if any(result.schema_id is None for result in results):
        raise typer.Exit(1)


@registry_app.command("start")
def registry_start(ctx: typer.Context,
                   port: Annotated[int, typer.Option(help="Its port on 127.0.0.1.")] = DEFAULT_PORT) -> None:
    """Start the registry in the background (fetched on first use) and print its URL."""
    try:
        url = RegistryServer(settings(ctx).home, port).start()
    except RegistryError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from None
    console.print(f"schema registry: {url}  (export AGL_SCHEMA_REGISTRY_URL={url})")


@registry_app.command("stop")
def registry_stop(ctx: typer.Context) -> None:
    """Stop the registry (its schemas are forgotten)."""
    pid = RegistryServer(settings(ctx).home).stop()
    console.print(f"stopped (pid {pid})" if pid is not None else "not running")


@registry_app.command("status")
def registry_status(ctx: typer.Context) -> None:
    """Whether the registry runs and answers (exit 3 when it does not run)."""
    server = RegistryServer(settings(ctx).home)
    pid = server.pid()
    if pid is None:
        console.print("not running")
        raise typer.Exit(3)
    console.print(f"running (pid {pid}), {'answering' if server.answers() else 'not answering yet'} on {server.url}")

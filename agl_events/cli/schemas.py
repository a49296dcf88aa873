"""`agl-events schemas check|snapshot`: keep the event contract backward compatible."""

from __future__ import annotations

import typer
from rich.console import Console

from agl_events.config import PROJECT_ROOT
from agl_events.events.compat import check_backward_compatibility, snapshot_history
from agl_events.events.schemas import SCHEMAS_DIR

schemas_app = typer.Typer(help="Check and record versions of the event schemas.", no_args_is_help=True)
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

"""`agl-events apo history`: the candidates of APO runs, as the store's view folds their steps from the log."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from agl_events.cli.context import DEFAULT_STORE_URL, AuthToken, StoreUrl, ask_store, settings
from agl_events.server.client import experiment_url
from agl_events.types import PromptCandidate

apo_app = typer.Typer(help="Prompt optimization (APO) runs of an experiment.", no_args_is_help=True)
console = Console(soft_wrap=True)


@apo_app.command()
def history(
    ctx: typer.Context,
    run: Annotated[str | None, typer.Option("--run", help="One run's id (default: every run).")] = None,
    full: Annotated[bool, typer.Option("--full", help="Whole templates and critiques, not their first line.")
                    ] = False,
    store_url: StoreUrl = DEFAULT_STORE_URL,
    auth_token: AuthToken = None,
) -> None:
    """Every candidate with its parent, round, scores and template (failed edits with their reason)."""
    cfg = settings(ctx, auth_token)

    candidates = ask_store(experiment_url(store_url, cfg.experiment), lambda c: c.prompt_candidates(run), console,
                           cfg.store_token)
    if not candidates:
        console.print(f"no APO candidates in experiment {cfg.experiment}" + (f" for run {run}" if run else ""))
        raise typer.Exit(1)
    for run_id in dict.fromkeys(c.run_id for c in candidates):
        console.print(_table(run_id, [c for c in candidates if c.run_id == run_id], full))


def _short(text: str | None, full: bool) -> str:
    if not text:
        return ""
    return text if full else text.strip().splitlines()[0][:80]


def _table(run_id: str, candidates: list[PromptCandidate], full: bool) -> Table:
    table = Table("round", "candidate", "parent", "val batch", "full val", "template / reason",
                  title=f"APO run {run_id}: {len(candidates)} candidates")
    best = max((c for c in candidates if c.best_full_score is not None), key=lambda c: c.best_full_score or 0.0,
               default=None)
    for c in candidates:
        batch = [f"{s.score:.3f}" for s in c.scores if s.scope == "batch" and s.score is not None]
        whole = [f"{s.score:.3f}" for s in c.scores if s.scope == "full" and s.score is not None]
        mark = " [bold green]best[/]" if c is best else ""
        text = f"[red]failed: {c.reason}[/]" if c.status == "failed" else _short(c.template, full)
        table.add_row(str(c.round if c.round is not None else ""), c.candidate_id + mark, c.parent_id or "",
                      " ".join(batch), " ".join(whole), text)
    return table

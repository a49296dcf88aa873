"""`agl-events dlq list | show | replay`: an experiment's dead letters, for an operator to inspect and re-drive."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column, Table

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings
from agl_events.events.codec import CodecError
from agl_events.log.dlq import DeadLetter, dead_letters, replay, unreplayable
from agl_events.log.registry import codec_for

dlq_app = typer.Typer(help="The experiment's dead letters: list, show, replay once fixed.", no_args_is_help=True)
console = Console(soft_wrap=True)

AsJson = Annotated[bool, typer.Option("--json", help="One JSON document on stdout instead of tables.")]
Which = Annotated[str, typer.Argument(help="A dead letter: its number in `dlq list` (its first copy's DLQ offset) "
                                           "or its origin, <topic>/<partition>/<offset>.")]


def _letters(bootstrap: str, experiment: str) -> list[DeadLetter]:
    try:
        return dead_letters(bootstrap, experiment)
    except RuntimeError as exc:  # no DLQ topic: no such experiment
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from None


def _summary(letter: DeadLetter) -> dict[str, Any]:
    return {"number": letter.dlq_offset, "origin": letter.origin, "error_type": letter.error_type,
            "error": letter.error, "copies": letter.copies, "time": letter.time, "replayed_to": letter.replayed_to,
            "key": None if letter.key is None else letter.key.decode(errors="replace"), "bytes": len(letter.value)}


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


@dlq_app.command("list")
def list_(ctx: typer.Context, as_json: AsJson = False) -> None:
    """One row per dead-lettered record (copies of one record merged): where it came from, why, whether it was
    replayed."""
    cfg = settings(ctx)
    letters = _letters(ensure_broker(cfg), cfg.experiment)
    if as_json:
        typer.echo(json.dumps({"experiment": cfg.experiment, "dead_letters": [_summary(d) for d in letters]}))
        return
    if not letters:
        console.print(f"no dead letters in experiment {cfg.experiment}")
        return
    table = Table("#", Column("origin (topic/partition/offset)", no_wrap=True), "error", "copies", "first (UTC)",
                  "replayed to", title=f"dead letters of {cfg.experiment}")
    for d in letters:
        table.add_row(str(d.dlq_offset), d.origin, f"{d.error_type}: {d.error[:120]}", str(d.copies), _when(d.time),
                      d.replayed_to or "")
    console.print(table)


def _find(letters: list[DeadLetter], which: str) -> DeadLetter:
    for letter in letters:
        if which in (letter.origin, str(letter.dlq_offset)):
            return letter
    console.print(f"[red]no dead letter {which!r}[/] (give a number or an origin from `agl-events dlq list`)")
    raise typer.Exit(1)


@dlq_app.command()
def show(ctx: typer.Context, which: Which, as_json: AsJson = False) -> None:
    """One dead letter in full: origin, error, headers, key, and its content (decoded when the current code can,
    otherwise the first bytes in hex)."""
    cfg = settings(ctx)
    letter = _find(_letters(ensure_broker(cfg), cfg.experiment), which)
    codec = codec_for(cfg.schema_registry_url)
    try:
        decoded = codec.decode(letter.value)
        content: Any = {"kind": decoded.name, "record": decoded.record}
    except CodecError as exc:
        content = {"undecodable": str(exc), "hex": letter.value[:256].hex(), "text": letter.value[:256].decode(
            errors="replace")}
    shown = {**_summary(letter), "headers": {k: v.decode(errors="replace") for k, v in letter.headers.items()},
             "content": content, "replayable": unreplayable(letter, codec, cfg.experiment) or "yes"}
    if as_json:
        typer.echo(json.dumps(shown, default=str))
        return
    console.print_json(json.dumps(shown, default=str))


@dlq_app.command("replay")
def replay_command(
    ctx: typer.Context,
    which: Annotated[list[str] | None, typer.Argument(help="Dead letters to replay (numbers or origins).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every dead letter the current code reads.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be replayed, replay nothing.")] = False,
) -> None:
    """Append dead letters, as they were, to the topics they came from, once each (the live store then reads them
    as any record), and mark them replayed. A dead letter the current code still cannot read, or one that is
    no record problem, stays where it is, with the reason. Exit 1 if any named one was not replayed."""
    if bool(which) == all_:
        raise typer.BadParameter("name dead letters to replay, or give --all (not both)")
    cfg = settings(ctx)
    bootstrap = ensure_broker(cfg)
    letters = _letters(bootstrap, cfg.experiment)
    chosen = letters if all_ else [_find(letters, w) for w in which or []]
    codec = codec_for(cfg.schema_registry_url)
    ready, refused = [], 0
    for letter in chosen:
        why = unreplayable(letter, codec, cfg.experiment)
        if why is None:
            ready.append(letter)
        elif not (all_ and letter.replayed_to is not None):  # --all passes over what was replayed, silently
            refused += 1
            console.print(f"{letter.origin}: not replayed: {why}")
    if dry_run:
        for letter in ready:
            console.print(f"{letter.origin}: would be replayed to {letter.topic}")
    else:
        for origin, target in replay(bootstrap, cfg.experiment, ready).items():
            console.print(f"{origin}: replayed to {target}")
    console.print(f"{'would replay' if dry_run else 'replayed'} {len(ready)}, left {refused}")
    if refused and not all_:
        raise typer.Exit(1)

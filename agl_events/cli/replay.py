"""`agl-events replay ...`: rebuild and verify views, snapshots, and training data exported from the log."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import DEFAULT_STORE_URL, AuthToken, StoreUrl, ask_store, settings
from agl_events.cli.export import export
from agl_events.config import Settings
from agl_events.log.clients import make_admin, make_consumer
from agl_events.log.offsets import partitions_of
from agl_events.log.records import Position
from agl_events.replay.cut import CutSpec, parse_duration, parse_time, until_time
from agl_events.replay.digest import Digest, digest, first_field_difference, part_of
from agl_events.replay.rebuild import HistoryGone, ProgressCallback, Rebuilt, rebuild
from agl_events.replay.snapshot import keep_latest, list_snapshots, partial_dir, prune_spans, seal
from agl_events.server.client import experiment_url
from agl_events.store.readonly import ReadOnlyStore
from agl_events.topics import Topic, topic_name
from agl_events.views.lock import ViewsInUseError, holder_of

replay_app = typer.Typer(help="Replay an experiment's history: rebuild, verify, snapshot, export.",
                         no_args_is_help=True)

Experiment = Annotated[str | None, typer.Option("--experiment", "-e",
                                                help="Experiment to replay (default: the global --experiment).")]
Until = Annotated[str | None, typer.Option("--until", help="Fold the records appended up to this time "
                                           "(ISO 8601, UTC unless it says, or seconds since the epoch).")]
UntilResources = Annotated[str | None, typer.Option("--until-resources",
                                                    help="Fold up to the publication of these resources.")]
Offsets = Annotated[Path | None, typer.Option("--offsets", exists=True, dir_okay=False,
                                              help="Fold up to these offsets (JSON: {\"topic/partition\": offset}).")]
Snapshots = Annotated[Path | None, typer.Option("--snapshots", help="Snapshot folder (default <home>/snapshots).")]
NoSnapshot = Annotated[bool, typer.Option("--no-snapshot", help="Fold from offset 0, ignoring snapshots.")]


def _settings(ctx: typer.Context, experiment: str | None, auth_token: str | None = None) -> Settings:
    cfg = settings(ctx, auth_token)
    update: dict[str, object] = {"bootstrap": ensure_broker(cfg)}
    if experiment is not None:
        update["experiment"] = experiment
    try:
        return Settings.model_validate({**cfg.model_dump(), **update})
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _cut(until: str | None, until_resources: str | None, offsets: Path | None) -> CutSpec:
    try:
        return CutSpec(until=None if until is None else parse_time(until), until_resources=until_resources,
                       offsets=offsets)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def snapshot_root(cfg: Settings, snapshots: Path | None) -> Path:
    return snapshots or cfg.home / "snapshots"


@contextmanager
def _bar(console: Console, what: str) -> Iterator[ProgressCallback]:
    """A progress bar with the fold rate, as a rebuild's progress callback."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console, transient=True) as bar:
        task, started = bar.add_task(what, total=None, rate=""), time.perf_counter()

        def update(done: int, total: int) -> None:
            rate = done / max(time.perf_counter() - started, 1e-9)
            bar.update(task, completed=done, total=total, rate=f"{rate:,.0f} records/s")

        yield update


def _rebuild(console: Console, cfg: Settings, to: Path, spec: CutSpec, snapshots: Path | None) -> Rebuilt:
    try:
        with _bar(console, f"rebuilding {cfg.experiment}") as progress:
            return rebuild(cfg, to, spec, snapshots=snapshots, progress=progress)
    except (HistoryGone, FileExistsError, LookupError) as exc:
        console.print(f"[red]{exc}[/]", soft_wrap=True)
        raise typer.Exit(1) from exc


def _report(console: Console, done: Rebuilt) -> None:
    start = f"snapshot {done.snapshot.path.name}" if done.snapshot else "offset 0"
    console.print(f"rebuilt {done.path} from {start} up to {done.cut.why}: {done.records:,} records "
                  f"({done.folded:,} events folded) in {done.seconds:.1f} s, {done.records_per_second:,.0f} records/s",
                  soft_wrap=True)


@replay_app.command("rebuild")
def rebuild_command(ctx: typer.Context, to: Annotated[Path, typer.Option("--to", help="An empty folder for the view.")],
                    experiment: Experiment = None, until: Until = None, until_resources: UntilResources = None,
                    offsets: Offsets = None, snapshots: Snapshots = None, no_snapshot: NoSnapshot = False) -> None:
    """Fold the log (from the latest usable snapshot, or offset 0) into a fresh view, up to a cut."""
    held = holder_of(to.resolve())  # a live store's views: it would open the same RocksDB folder, or serve ours
    if held is not None:
        refused = ViewsInUseError(*held, remedy="rebuild into a folder outside it with --to DIR")
        Console(stderr=True).print(str(refused), style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    cfg, console = _settings(ctx, experiment), Console()
    root = None if no_snapshot else snapshot_root(cfg, snapshots)
    _report(console, _rebuild(console, cfg, to, _cut(until, until_resources, offsets), root))


def _digest_table(rows: list[tuple[str, Digest]]) -> Table:
    table = Table("view", "digest", "rollouts", "attempts", "spans", "resources", "workers")
    for name, found in rows:
        table.add_row(name, found.value[:16], *(f"{found.counts.get(k, 0):,}" for k in
                                                ("rollouts", "attempts", "spans", "resources", "worker")))
    return table


@replay_app.command()
def verify(ctx: typer.Context, experiment: Experiment = None, store_url: StoreUrl = DEFAULT_STORE_URL,
           auth_token: AuthToken = None,
           view: Annotated[Path | None, typer.Option("--view", help="A rebuilt view (default: rebuild one now, "
                                                     "to the log's end).")] = None,
           snapshots: Snapshots = None, no_snapshot: NoSnapshot = False) -> None:
    """Compare a rebuilt view with the live store (through its API): digests, and the first difference.

    Exit status 0 when equal, 1 when they differ. Run it while the experiment is quiet: a live store that moves on
    during the comparison differs from any fixed rebuild."""
    cfg, console = _settings(ctx, experiment, auth_token), Console()
    cfg.home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agl-verify-", dir=cfg.home) as scratch:
        if view is None:
            view = Path(scratch) / "view"
            _report(console, _rebuild(console, cfg, view, CutSpec(), None if no_snapshot else
                                      snapshot_root(cfg, snapshots)))
        rebuilt = ReadOnlyStore.open(view)
        try:
            ours = asyncio.run(digest(rebuilt))
            url = experiment_url(store_url, cfg.experiment)
            live = ask_store(url, digest, console, cfg.store_token)
            console.print(_digest_table([(f"rebuilt {view}", ours), (f"live {url}", live)]))
            difference = ours.first_difference(live)
            if difference is None:
                console.print(f"[green]equal[/]: {ours.value}")
                return
            mine = asyncio.run(part_of(rebuilt, difference))
            theirs = ask_store(url, lambda client: part_of(client, difference), console, cfg.store_token)
            where = first_field_difference(mine, theirs)
            console.print(f"[red]different[/]: first at {difference}" +
                          ("" if where is None else f", field {where[0]}: rebuilt {where[1]!r:.200} vs live "
                                                    f"{where[2]!r:.200}"))
            raise typer.Exit(1)
        finally:
            asyncio.run(rebuilt.close())


@replay_app.command()
def snapshot(ctx: typer.Context, experiment: Experiment = None, snapshots: Snapshots = None,
             keep: Annotated[int, typer.Option(min=1, help="Snapshots to keep (older ones are deleted).")] = 3,
             prune_spans_: Annotated[bool, typer.Option("--prune-spans", help="Then delete the span records the "
                                                        "oldest kept snapshot covers from the broker.")] = False,
             keep_spans_for: Annotated[str | None, typer.Option(
                 "--keep-spans-for", help="With --prune-spans: keep spans appended within this long (7d, 12h, "
                 "3600) even where a snapshot covers them, for exports of recent history.")] = None,
             every: Annotated[float | None, typer.Option(min=1.0, help="Take one every N seconds, until stopped.")
                              ] = None) -> None:
    """Fold the log's new records onto the latest snapshot and keep the result as a new snapshot."""
    cfg, console = _settings(ctx, experiment), Console()
    root = snapshot_root(cfg, snapshots)
    try:
        keep_seconds = None if keep_spans_for is None else parse_duration(keep_spans_for)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--keep-spans-for") from exc
    if keep_seconds is not None and not prune_spans_:
        raise typer.BadParameter("needs --prune-spans", param_hint="--keep-spans-for")
    while True:
        taken_at = time.time()
        partial = partial_dir(root, cfg.experiment, taken_at)
        done = _rebuild(console, cfg, partial / "view", CutSpec(), root)
        sealed = seal(partial, cfg.experiment, taken_at, done.cut)
        _report(console, done)
        console.print(f"snapshot {sealed.path} ({done.cut.total:,} records covered)")
        for gone in keep_latest(root, cfg.experiment, keep):
            console.print(f"deleted old snapshot {gone.name}")
        if prune_spans_:
            oldest = list_snapshots(root, cfg.experiment)[0]
            keep = None if keep_seconds is None else _span_offsets_since(cfg, time.time() - keep_seconds)
            pruned = prune_spans(make_admin(cfg.bootstrap_servers), oldest, keep)
            console.print(f"spans before snapshot {oldest.path.name} deleted from the broker: "
                          + ", ".join(f"{t}[{p}] < {o}" for (t, p), o in sorted(pruned.items())))
        if every is None:
            return
        time.sleep(max(0.0, taken_at + every - time.time()))


def _span_offsets_since(cfg: Settings, when: float) -> dict[Position, int]:
    """Per span partition, the first offset appended after `when`: where pruning stops to keep recent spans."""
    consumer = make_consumer(cfg.bootstrap_servers)
    try:
        return until_time(consumer, partitions_of(consumer, [topic_name(cfg.experiment, Topic.SPANS)]), when).positions
    finally:
        consumer.close()


@replay_app.command()
def snapshots(ctx: typer.Context, experiment: Experiment = None, snapshots: Snapshots = None) -> None:
    """List an experiment's snapshots, oldest first."""
    cfg, console = settings(ctx), Console()
    name = experiment or cfg.experiment
    found = list_snapshots(snapshot_root(cfg, snapshots), name)
    if not found:
        console.print(f"no snapshots of {name} in {snapshot_root(cfg, snapshots)}")
        raise typer.Exit(1)
    table = Table("snapshot", "taken", "records covered", "path")
    for item in found:
        table.add_row(item.path.name, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(item.taken_at)),
                      f"{item.cut.total:,}", str(item.path))
    console.print(table)


replay_app.command()(export)

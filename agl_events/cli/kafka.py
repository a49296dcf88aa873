"""`agl-events kafka ...`: run the embedded broker that is used when no cluster is configured: one node, or a
local cluster of several (`start --brokers 3`, `broker.cluster`), which the other sub-commands then cover whole.

Other commands start the broker on their own (`ensure_broker`); these commands exist to start it
ahead of time, stop it, check on it and read its log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agl_events.broker import BrokerError, BrokerStatus, probe
from agl_events.broker.cluster import ClusterStatus
from agl_events.broker.local import local_cluster
from agl_events.cli.context import settings
from agl_events.config import Settings
from agl_events.log.kafka_config import connection_config, redacted

#: `kafka status` exit code when the broker is not running (0 = running and answering).
EXIT_NOT_RUNNING = 3

kafka_app = typer.Typer(
    help="Manage the local Kafka broker (or local cluster) used when no --bootstrap / AGL_KAFKA_BOOTSTRAP is set.",
    no_args_is_help=True,
)

_T = TypeVar("_T")


def _console() -> Console:
    # Created per call so that output goes to the stdout of the moment (CliRunner swaps it).
    return Console(highlight=False)


def _fail(message: str) -> NoReturn:
    """A red message on stderr and exit code 1: broker problems are explained, not traced back."""
    Console(stderr=True, highlight=False).print(Text(message, style="red"))
    raise typer.Exit(1)


def _guarded(action: Callable[[], _T]) -> _T:
    try:
        return action()
    except BrokerError as exc:
        _fail(str(exc))


def _refuse_remote(cfg: Settings, verb: str) -> None:
    """The CLI only manages the local broker; a configured cluster is somebody else's to run."""
    if not cfg.uses_local_broker:
        _fail(
            f"A remote Kafka cluster is configured ({cfg.bootstrap}, from --bootstrap or "
            f"AGL_KAFKA_BOOTSTRAP), so there is no local broker to {verb}. "
            "Unset it to use the local broker."
        )


def _print_cluster(cluster: ClusterStatus) -> None:
    if len(cluster.nodes) > 1:
        _console().print(Text(f"local cluster of {len(cluster.nodes)} nodes: {cluster.bootstrap}", style="bold"))
    for node in cluster.nodes:
        _print_status(node)


def _print_status(status: BrokerStatus) -> None:
    if status.running and status.ready:
        state = Text(f"running (pid {status.pid})", style="green")
    elif status.running:
        state = Text(f"running (pid {status.pid}) but not answering yet", style="yellow")
    else:
        state = Text("not running", style="yellow")
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("state", state)
    table.add_row("bootstrap", status.bootstrap)
    table.add_row("data", str(status.data_dir))
    table.add_row("log", str(status.log_file))
    if status.open_files is not None and status.open_files_limit is not None:
        table.add_row("open files", f"{status.open_files:,} of {status.open_files_limit:,}")
    if status.message not in ("", "running", "not running"):  # those only repeat the state
        table.add_row("note", Text(status.message))
    _console().print(table)


@kafka_app.command()
def start(
    ctx: typer.Context,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the broker to answer.")] = 60.0,
    brokers: Annotated[int | None, typer.Option(
        min=1, help="Nodes (each a broker and a KRaft controller) on ports AGL_KAFKA_PORT + 2(N-1) and "
                    "AGL_KAFKA_CONTROLLER_PORT + 2(N-1); default: as many as this home ran last, else 1.")] = None,
) -> None:
    """Start the local broker, or a local cluster, in the background (downloading Kafka with Maven the first
    time)."""
    cfg = settings(ctx)
    _refuse_remote(cfg, "start")
    _print_cluster(_guarded(lambda: local_cluster(cfg, brokers).start(timeout=timeout)))


@kafka_app.command()
def stop(
    ctx: typer.Context,
    timeout: Annotated[float, typer.Option(help="Seconds to allow a clean shutdown before killing.")] = 30.0,
) -> None:
    """Stop the local broker (every node of a local cluster) cleanly; its data is kept for the next start."""
    cfg = settings(ctx)
    _refuse_remote(cfg, "stop")
    _print_cluster(_guarded(lambda: local_cluster(cfg).stop(timeout=timeout)))


@kafka_app.command()
def status(ctx: typer.Context) -> None:
    """Show whether the broker (every node of a local cluster) runs. Exit code 0: all running and answering;
    3: not (yet)."""
    cfg = settings(ctx)
    if not cfg.uses_local_broker:
        reachable = probe(cfg.bootstrap_servers, timeout=5.0)
        style, verdict = ("green", "reachable") if reachable else ("red", "not reachable")
        _console().print(Text(f"remote cluster {cfg.bootstrap_servers}: {verdict}", style=style))
        if shown := redacted(connection_config()):  # which settings were used, secrets hidden
            _console().print(Text("connection settings: " + ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))))
        raise typer.Exit(0 if reachable else EXIT_NOT_RUNNING)
    cluster_status = _guarded(local_cluster(cfg).status)
    _print_cluster(cluster_status)
    raise typer.Exit(0 if cluster_status.ready else EXIT_NOT_RUNNING)


@kafka_app.command()
def logs(
    ctx: typer.Context,
    lines: Annotated[int, typer.Option("--lines", "-n", help="How many of the last lines to show.")] = 50,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines (Ctrl-C).")] = False,
) -> None:
    """Print the end of the local broker's log (server.log; each node's, prefixed, for a local cluster)."""
    broker = local_cluster(settings(ctx))
    missing = [node.log_file for node in broker.nodes if not node.log_file.exists()]
    if len(missing) == len(broker.nodes) and not follow:
        _console().print(Text(f"no broker log yet at {', '.join(map(str, missing))}", style="yellow"))
        return
    for line in broker.tail(lines):
        typer.echo(line)
    if follow:
        try:
            for line in broker.follow():
                typer.echo(line)
        except KeyboardInterrupt:
            pass

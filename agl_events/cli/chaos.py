"""`agl-events chaos`: a workload through store, processor and runners while they (and, on a local cluster, the
leaders of the busiest partitions) are killed, then the checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from agl_events.chaos.run import ChaosConfig, ChaosReport, run_chaos
from agl_events.cli.context import settings

console = Console(soft_wrap=True)


def _table(report: ChaosReport) -> Table:
    table = Table("figure", "value", title="chaos run")
    rows = {"rollouts": report.rollouts, "stores (one store group)": report.stores, "statuses": report.statuses,
            "attempts": report.attempts, "spans": report.spans, "kills (SIGKILL)": report.kills_by_target,
            "restarts after a crash": report.restarts_after_crash or "none",
            "broker restarts": report.broker_restarts, "brokers": report.brokers,
            "leader kills (SIGKILL)": report.leader_kills,
            "failover seconds (kill -> next acknowledged append: first, all)":
                [(f.first_seconds, f.all_seconds) for f in report.failovers] or "none",
            "rolling restart seconds": report.rolling_restart_seconds or "none",
            "errors seen by clients (API calls, attempts not succeeded)":
                f"{report.client_errors} ({report.api_errors}, {report.attempts_not_succeeded})",
            "lost": report.lost, "duplicated": report.duplicated,
            "non-terminal": report.non_terminal, "sequence gaps": report.gaps,
            "live store = rebuild from offset 0": report.rebuild_equal,
            "processor views = rebuild": report.processor_equal, "seconds": report.seconds}
    for name, value in rows.items():
        table.add_row(name, str(value))
    return table


def chaos(
    ctx: typer.Context,
    rollouts: Annotated[int, typer.Option(min=1, help="Rollouts in the workload.")] = 300,
    runners: Annotated[int, typer.Option(min=1, help="Runner processes.")] = 3,
    stores: Annotated[int, typer.Option(min=1, help="Store processes in one store group; runner i talks to store i "
                                                    "mod N, a store kill SIGKILLs one member.")] = 1,
    kills: Annotated[int, typer.Option(min=0, help="SIGKILLs, spread over store, processor and runners.")] = 5,
    broker_restarts: Annotated[int | None, typer.Option(
        min=0, max=1, help="Stop and start the single broker (0 or 1; default 1, 0 on a cluster).")] = None,
    brokers: Annotated[int, typer.Option(min=1, help="Nodes of the run's local cluster (3: replication 3, "
                                                     "min.insync.replicas 2).")] = 1,
    leader_kills: Annotated[int | None, typer.Option(
        min=0, help="SIGKILLs of the busiest partitions' leader, each started again once failed over (default 3 "
                    "on a cluster).")] = None,
    rolling_restart: Annotated[bool | None, typer.Option(
        "--rolling-restart/--no-rolling-restart", help="Restart every node in turn, once (default on a cluster).")
    ] = None,
    step_seconds: Annotated[float, typer.Option(min=0, help="Seconds each of the agent's 3 steps takes.")] = 0.05,
    seed: Annotated[int, typer.Option(help="Seed of the kill plan.")] = 0,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait for every rollout to finish.")] = 900,
    home: Annotated[Path | None, typer.Option(help="The run's folder (default <home>/chaos; emptied first).")] = None,
) -> None:
    """Run N rollouts on a broker of the run's own (started on free ports, never yours) with a store server (or
    `--stores N` of them in one store group), a processor and runner processes, SIGKILL them at random moments and
    restart the broker once (on a cluster, `--brokers 3`: SIGKILL the busiest partitions' leader and restart every
    node in turn); then check through the REST API and a view rebuilt from the log that every rollout is terminal,
    every acknowledged span is there, nothing is duplicated, sequence ids have no gaps, every store's answers
    equal the rebuild and the processor's views do too.
    Prints a table, then one JSON line; exit 1 if anything was lost, duplicated or left unfinished, or (on a
    cluster with `--kills 0`) if a client saw an error."""
    cfg = settings(ctx)
    cluster = brokers > 1
    try:
        config = ChaosConfig(rollouts=rollouts, runners=runners, stores=stores, kills=kills, brokers=brokers,
                             broker_restarts=(0 if cluster else 1) if broker_restarts is None else broker_restarts,
                             leader_kills=(3 if cluster else 0) if leader_kills is None else leader_kills,
                             rolling_restart=cluster if rolling_restart is None else rolling_restart,
                             step_seconds=step_seconds, seed=seed, timeout=timeout, home=home or cfg.home / "chaos")
    except ValueError as exc:  # a plan the cluster cannot carry out (leader kills on one broker, say)
        raise typer.BadParameter(str(exc).splitlines()[-1]) from None
    report = run_chaos(config, say=lambda line: console.print(f"[dim]{line}[/]"))
    console.print(_table(report))
    for problem in report.problems:
        console.print(f"[red]{problem}[/]")
    typer.echo(json.dumps(report.summary()))
    if not report.ok:
        raise typer.Exit(1)

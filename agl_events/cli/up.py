"""`agl-events up | status | down`: an experiment's processes on this machine, supervised (`agl_events.supervise`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.live import Live
from rich.table import Table

from agl_events.broker.local import LocalBroker
from agl_events.cli import store as store_command
from agl_events.cli.context import DEFAULT_STORE_URL, settings
from agl_events.runner.agents import load_agent
from agl_events.server.app import DEFAULT_PORT
from agl_events.supervise import launch, snapshot
from agl_events.supervise.paths import UpPaths
from agl_events.supervise.plan import Kind, UpOptions
from agl_events.supervise.state import UpState
from agl_events.supervise.supervisor import supervise as run_supervisor
from agl_events.supervise.view import render

console = Console()


def up(
    ctx: typer.Context,
    runners: Annotated[int, typer.Option(min=0, help="Runner processes (one `agl-events runner -n 1` each).")] = 2,
    processors: Annotated[int, typer.Option(min=0, help="View-processor workers.")] = 1,
    stores: Annotated[int, typer.Option(min=1, help="Store servers, on ports --store-port, +1, ...")] = 1,
    samples: Annotated[bool, typer.Option("--samples/--no-samples", help="The samples worker.")] = True,
    proxy: Annotated[bool, typer.Option("--proxy", help="The LLM proxy (needs --model-list).")] = False,
    model_list: Annotated[Path | None, typer.Option("--model-list", exists=True, dir_okay=False,
                                                    help="The proxy's LiteLLM model list.")] = None,
    proxy_port: Annotated[int, typer.Option(help="The proxy's port.")] = 4000,
    agent: Annotated[str | None, typer.Option(help="The runners' agent as module:object (needed with runners).")
                     ] = None,
    store_port: Annotated[int, typer.Option(help="The first store's port.")] = DEFAULT_PORT,
    foreground: Annotated[bool, typer.Option("--foreground", help="Stay attached; Ctrl-C stops everything.")
                          ] = False,
    wait_timeout: Annotated[float, typer.Option(help="Seconds to wait for the stores to answer.")] = 120.0,
    stop_timeout: Annotated[float, typer.Option(help="Seconds each kind of process gets to stop before SIGKILL.")
                            ] = 30.0,
) -> None:
    """Start the experiment's processes in the background under a supervisor that restarts what crashes.

    Broker (local, if not running), topics, stores, processors, samples worker, proxy, runners; logs in
    <home>/up/<experiment>/logs. Running it again for the same experiment adds nothing.
    """
    try:
        options = UpOptions(runners=runners, processors=processors, stores=stores, samples=samples, proxy=proxy,
                            model_list=model_list, proxy_port=proxy_port, agent=agent, store_port=store_port)
        if options.agent:
            load_agent(options.agent)  # fail here, with the reason, rather than in a crash-looping runner
    except (ValidationError, ValueError) as exc:
        errors = exc.errors() if isinstance(exc, ValidationError) else [{"msg": str(exc)}]
        raise typer.BadParameter("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in errors)) from exc
    cfg = settings(ctx)
    try:
        plan, supervisor = launch.start(cfg, options, advertise=_store_advertises(), stop_grace=stop_timeout,
                                        foreground=foreground)
    except launch.AlreadyUpError as exc:
        console.print(str(exc))
        return
    except launch.UpError as exc:
        console.print(str(exc), style="red", markup=False, highlight=False)
        raise typer.Exit(1) from exc
    paths = UpPaths(plan.home, plan.experiment)
    if foreground:
        console.print(f"supervising {len(plan.processes)} processes of experiment {plan.experiment} (logs in "
                      f"{paths.logs}); Ctrl-C stops everything")
        raise typer.Exit(launch.wait_attached(supervisor))
    try:
        with console.status("starting") as progress:
            launch.wait_for_stores(plan, supervisor, wait_timeout, lambda line: progress.update(line),
                                   cfg.store_token)
    except launch.UpError as exc:
        console.print(str(exc), style="red", markup=False, highlight=False)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt as exc:
        console.print(f"still starting in the background (supervisor pid {supervisor.pid}): `agl-events status` "
                      "shows it, `agl-events down` stops it")
        raise typer.Exit(130) from exc
    table = Table(title=f"experiment {plan.experiment} is up (supervisor pid {supervisor.pid})", title_justify="left")
    for column in ("process", "address"):
        table.add_column(column)
    for spec in plan.processes:
        table.add_row(spec.name, spec.url or "")
    console.print(table)
    console.print(f"logs in {paths.logs}; `agl-events status [--watch]` shows it live, `agl-events down` stops it")


def status(
    ctx: typer.Context,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes (and over which rates are "
                                            "measured).")] = 2.0,
    store_url: Annotated[str | None, typer.Option("--store-url", envvar="AGL_STORE_URL", show_default=False,
                                                  help="The store to ask (default: the first store `up` started, "
                                                       f"else {DEFAULT_STORE_URL}).")] = None,
) -> None:
    """Processes and their health, consumer lag per group and partition, rollouts by status, spans/s, samples/s,
    latest resources: one view of the experiment."""
    cfg = settings(ctx)
    paths = UpPaths(cfg.home, cfg.experiment)

    def take() -> snapshot.Snapshot:
        state = paths.read_state() if paths.supervisor_pid() is not None else None
        url = store_url or _first_store(state) or DEFAULT_STORE_URL
        bootstrap: str | None = state.bootstrap if state is not None else cfg.bootstrap_servers
        if state is None and cfg.uses_local_broker and not LocalBroker(cfg).is_ready(timeout=1.0):
            bootstrap = None  # refused at once: no waiting for a broker that is not there
        return snapshot.take(bootstrap, cfg.experiment, url, state, auth_token=cfg.store_token,
                             timeout=cfg.kafka_timeout)

    previous = take()
    time.sleep(interval)
    current = take()
    if not watch:
        console.print(render(current, previous))
        return
    with Live(render(current, previous), console=console, refresh_per_second=4) as live:
        try:
            while True:
                time.sleep(interval)
                previous, current = current, take()
                live.update(render(current, previous))
        except KeyboardInterrupt:
            pass


def down(
    ctx: typer.Context,
    timeout: Annotated[float | None, typer.Option(show_default="the stop timeout per kind of process, plus 60",
                                                  help="Seconds the supervisor may take before it is killed.")
                       ] = None,
) -> None:
    """Stop the experiment's processes: runners first, then proxy, workers and stores; the broker if `up` started
    it."""
    cfg = settings(ctx)
    with console.status(f"stopping experiment {cfg.experiment}"):
        stopped = launch.down(cfg, timeout)
    if stopped is None:
        console.print(f"nothing is up for experiment {cfg.experiment}")
        return
    for line in stopped:
        console.print(f"stopped {line}")


def supervise(ctx: typer.Context) -> None:
    """Internal: the supervisor `agl-events up` starts (reads <home>/up/<experiment>/plan.json)."""
    cfg = settings(ctx)
    run_supervisor(UpPaths(cfg.home, cfg.experiment),
                   say=lambda line: print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}", flush=True))


def _first_store(state: UpState | None) -> str | None:
    return next((p.url for p in state.processes if p.kind == Kind.STORE), None) if state is not None else None


def _store_advertises() -> bool:
    """Whether `agl-events store` takes `--advertise-url` (several stores sharing an experiment need it): the
    options its --help lists."""
    single = typer.Typer()
    single.command()(store_command.store)
    return any("--advertise-url" in getattr(param, "opts", ()) for param in typer.main.get_command(single).params)

"""`agl-events runner`: start runner processes on this machine, or ask every runner to stop."""

from __future__ import annotations

import signal
import time
from typing import Annotated

import typer
from rich.console import Console

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import DEFAULT_STORE_URL, AuthToken, StoreUrl, settings
from agl_events.log.registry import codec_for
from agl_events.log.writer import EventWriter
from agl_events.runner.agents import load_agent
from agl_events.runner.control import stop_request
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.client import experiment_url

runner_app = typer.Typer(help="Run agents on tasks from the experiment's task topic.")
console = Console()



@runner_app.callback(invoke_without_command=True)
def runner(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option(help="The agent as module:object (LitAgent, class or function).")
                     ] = None,
    n: Annotated[int, typer.Option("-n", min=1, help="How many runner processes to start.")] = 1,
    store_url: StoreUrl = DEFAULT_STORE_URL,
    auth_token: AuthToken = None,
    max_rollouts: Annotated[int | None, typer.Option(help="Each runner exits after this many rollouts.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Rollouts each runner runs at once (async agents on its "
                                             "loop, sync ones on its threads); claims and finishes go in batches.")
                           ] = 1,
    name: Annotated[str, typer.Option(help="Runner ids are <name>-0, <name>-1, ...: give each command of an "
                                      "experiment its own name (agl-events up does).")] = "runner",
) -> None:
    """Start N runners; Ctrl-C (or `agl-events runner stop`) lets them finish their rollout and exit."""
    if ctx.invoked_subcommand is not None:
        return
    if agent is None:
        raise typer.BadParameter("give the agent to run, e.g. --agent my_package.agents:my_agent", param_hint="--agent")
    try:
        load_agent(agent)  # fail here, with the reason, rather than in N child processes
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--agent") from exc
    cfg = settings(ctx, auth_token)  # the runners send its token (settings travel to their processes)
    cfg = cfg.model_copy(update={"bootstrap": ensure_broker(cfg)})
    config = RunnerConfig(settings=cfg, store_url=experiment_url(store_url, cfg.experiment), agent=agent,
                          max_rollouts=max_rollouts, concurrency=concurrency)
    pool = RunnerPool(config, n, name=name)
    pool.start()
    console.print(f"started {n} runner(s) for experiment [bold]{cfg.experiment}[/] "
                  f"(store {config.store_url}); Ctrl-C stops them after their current rollout")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        while pool.alive():
            time.sleep(0.5)
    except KeyboardInterrupt:
        console.print("stopping runners after their current rollout...")
        pool.stop()
    console.print("all runners stopped")


@runner_app.command()
def stop(ctx: typer.Context,
         runner_id: Annotated[str | None, typer.Option(help="Only this runner (default: all of them).")] = None,
         reason: Annotated[str, typer.Option(help="Recorded in the stop event.")] = "agl-events runner stop") -> None:
    """Ask every runner of the experiment (wherever it runs) to stop after its current rollout."""
    cfg = settings(ctx)
    writer = EventWriter(ensure_broker(cfg), cfg.experiment, codec_for(cfg.schema_registry_url),
                         producer_id="agl-events-cli")
    writer.append_sync([stop_request("agl-events-cli", time.time(), runner_id, reason)])
    writer.close()
    console.print(f"stop requested for {'runner ' + runner_id if runner_id else 'all runners'} "
                  f"of experiment {cfg.experiment}")

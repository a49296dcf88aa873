"""`agl-events store`: the LightningStore REST server (Agent Lightning 0.3.0 wire format) on Kafka."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import AuthToken, settings
from agl_events.replay.cut import CutSpec, parse_time
from agl_events.replay.rebuild import rebuild
from agl_events.server.app import DEFAULT_PORT, create_app, serve
from agl_events.server.auth import AuthConfigError, AuthTokens, load_experiment_tokens
from agl_events.store.contract import LightningStore
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.readonly import ReadOnlyStore
from agl_events.views.lock import ViewsInUseError, ViewsLock


def store(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Interface to listen on; 0.0.0.0 lets runners on other machines in.")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port (Agent Lightning's default).")] = DEFAULT_PORT,
    views: Annotated[Path | None, typer.Option(help="Where the RocksDB views live (default <home>/views); one store "
                                                "process per folder, so a second one here needs its own.")] = None,
    scan_debounce: Annotated[float, typer.Option(help="Seconds between watchdog scans (timeouts, silence).")
                             ] = 10.0,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    read_only: Annotated[bool, typer.Option("--read-only", help="Serve views of the past, refusing writes (405): "
                                            "rebuilt from the log up to --as-of*, or the views in --views as they are.")
                         ] = False,
    as_of: Annotated[str | None, typer.Option("--as-of", help="With --read-only: the store as it was at this time "
                                              "(ISO 8601 or seconds since the epoch).")] = None,
    as_of_resources: Annotated[str | None, typer.Option(
        "--as-of-resources", help="With --read-only: as it was when these resources were published.")] = None,
    as_of_offsets: Annotated[Path | None, typer.Option("--as-of-offsets", exists=True, dir_okay=False,
                                                       help="With --read-only: as of these log offsets (JSON).")
                             ] = None,
    advertise_url: Annotated[str | None, typer.Option(
        "--advertise-url", envvar="AGL_STORE_ADVERTISE_URL",
        help="Where the other store processes of an experiment reach this one (default http://<host>:<port>, "
             "the machine's name for 0.0.0.0). Stores of one experiment share its rollouts' partitions and "
             "forward each command to the owner.")] = None,
    single: Annotated[bool, typer.Option(
        "--single", help="Decide for every rollout, joining no store group (one store process per experiment; "
                         "the behaviour before store groups).")] = False,
    auth_token: AuthToken = None,
    auth_tokens: Annotated[Path | None, typer.Option(
        "--auth-tokens", envvar="AGL_AUTH_TOKENS_FILE", exists=True, dir_okay=False,
        help="Per-experiment bearer tokens: a JSON object {\"exp1\": \"token1\", ...}; the experiments it "
             "names need their own token, the others --auth-token's.")] = None,
) -> None:
    """Serve every experiment: the default one at the root, others under /experiments/<name>.

    With --auth-token or --auth-tokens every route but /health needs `Authorization: Bearer <token>` (or the
    token as basic-auth password); /metrics and the OpenAPI pages need the global token, if there is one.
    """
    cfg = settings(ctx, auth_token)
    try:
        auth = AuthTokens(cfg.store_token, load_experiment_tokens(auth_tokens) if auth_tokens else {})
    except AuthConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--auth-tokens") from exc
    views_root = views or cfg.home / "views"
    try:
        cut = CutSpec(until=None if as_of is None else parse_time(as_of), until_resources=as_of_resources,
                      offsets=as_of_offsets)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if cut != CutSpec() and not read_only:
        raise typer.BadParameter("--as-of, --as-of-resources and --as-of-offsets need --read-only")
    # Before anything else: a second store on these views would fail every request of an experiment both
    # serve. A read-only store opens views read-only (RocksDB lets it beside their writer) and locks nothing.
    try:
        views_lock: contextlib.AbstractContextManager[object] = (
            contextlib.nullcontext() if read_only else ViewsLock(views_root))
    except ViewsInUseError as exc:
        typer.echo(f"agl-events store: {exc}", err=True)
        raise typer.Exit(2) from None
    cfg = cfg.model_copy(update={"bootstrap": ensure_broker(cfg)})

    own_url = None if single else advertise_url or default_advertise_url(host, port)

    async def store_for(experiment: str) -> LightningStore:
        scoped = cfg.model_copy(update={"experiment": experiment})
        if not read_only:
            return await KafkaLightningStore.open(scoped, view_dir=views_root / experiment,
                                                  scan_debounce_seconds=scan_debounce, advertise_url=own_url,
                                                  auth_token=auth.required_for(experiment))
        if views is not None and cut == CutSpec():
            return ReadOnlyStore.open(views / experiment)
        (cfg.home / "replay").mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"as-of-{experiment}-", dir=cfg.home / "replay"))
        await asyncio.to_thread(rebuild, scoped, scratch / "view", cut, snapshots=cfg.home / "snapshots")
        return ReadOnlyStore.open(scratch / "view", remove_on_close=scratch)

    mode = "read-only, " if read_only else ""
    secured = "" if not auth.enabled else ", bearer tokens required"
    typer.echo(f"agl-events store on http://{host}:{port} ({mode}Kafka {cfg.bootstrap_servers}, "
               f"default experiment {cfg.experiment}, views in {views_root}{secured})")
    with views_lock:
        serve(create_app(store_for, default_experiment=cfg.experiment, auth=auth), host=host, port=port,
              log_level=log_level)


def default_advertise_url(host: str, port: int) -> str:
    """This server as other machines name it: its listen address, or the host name when it listens on all."""
    reachable = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    return f"http://{reachable}:{port}"

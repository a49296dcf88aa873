"""`agl-events store`: the LightningStore REST server (Agent Lightning 0.3.0 wire format) on Kafka."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings
from agl_events.server.app import DEFAULT_PORT, create_app, serve
from agl_events.store.base import LightningStore
from agl_events.store.kafka import KafkaLightningStore


def store(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Interface to listen on; 0.0.0.0 lets runners on other machines in.")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port (Agent Lightning's default).")] = DEFAULT_PORT,
    views: Annotated[Path | None, typer.Option(help="Where the RocksDB views live (default <home>/views).")] = None,
    scan_debounce: Annotated[float, typer.Option(help="Seconds between watchdog scans (timeouts, silence).")
                             ] = 10.0,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve every experiment: the default one at the root, others under /experiments/<name>."""
    cfg = settings(ctx)
    cfg = cfg.model_copy(update={"bootstrap": ensure_broker(cfg)})
    views_root = views or cfg.home / "views"

    async def store_for(experiment: str) -> LightningStore:
        return await KafkaLightningStore.open(cfg.model_copy(update={"experiment": experiment}),
                                              view_dir=views_root / experiment,
                                              scan_debounce_seconds=scan_debounce)

    typer.echo(f"agl-events store on http://{host}:{port} (Kafka {cfg.bootstrap_servers}, "
               f"default experiment {cfg.experiment}, views in {views_root})")
    serve(create_app(store_for, default_experiment=cfg.experiment), host=host, port=port, log_level=log_level)

"""`agl-events processor`: run one view-processor worker (a faust worker) in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings


def processor(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", show_default="<home>/processor/<experiment>",
                     help="Where this worker keeps its views, one RocksDB folder per <topic>/<partition>."),
    ] = None,
    web_port: Annotated[int, typer.Option("--web-port", help="Port of the worker's HTTP endpoints "
                                          "(GET /views/stats, GET /views/rollouts/{id}).")] = 6066,
    loglevel: Annotated[str, typer.Option("--loglevel", help="debug, info, warning or error.")] = "warning",
) -> None:
    """Fold the experiment's events into partition-local views; run more of these to share the partitions.

    Workers of one experiment form one consumer group; each keeps the views of its partitions.

    A partition without a folder is rebuilt from the log. Ctrl-C stops cleanly.

    Give each worker on one machine its own --data-dir and --web-port.
    """
    from agl_events.processors.views import default_data_dir, run_worker  # faust is heavy: import only to run

    cfg = settings(ctx)
    cfg = cfg.model_copy(update={"bootstrap": ensure_broker(cfg)})
    run_worker(cfg, data_dir or default_data_dir(cfg), web_port, loglevel)

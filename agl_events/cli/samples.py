"""`agl-events samples`: run one samples-processor worker (a faust worker) in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agl_events.adapter.build import DEFAULT_ADAPTER, adapter_from_spec
from agl_events.broker.local import ensure_broker
from agl_events.cli.context import settings


def samples(
    ctx: typer.Context,
    adapter: Annotated[
        str, typer.Option("--adapter", help="The adapter that turns a rollout's spans into triplets: a short name "
                          "(TracerTraceToTriplet, LlmProxyTraceToTriplet, TraceToMessages) or the import path "
                          "(pkg.mod:Name) of a TraceAdapter class, built with no arguments."),
    ] = DEFAULT_ADAPTER,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", show_default="<home>/samples/<experiment>",
                     help="Where this worker buffers spans, one RocksDB folder per span partition."),
    ] = None,
    web_port: Annotated[int, typer.Option("--web-port", help="Port of the worker's HTTP endpoint "
                                          "(GET /samples/stats).")] = 6067,
    loglevel: Annotated[str, typer.Option("--loglevel", help="debug, info, warning or error.")] = "warning",
) -> None:
    """Turn every finished rollout into a training sample on the samples topic; run more to share the work.

    Reads the span topic only. A rollout the adapter cannot handle goes to the DLQ with the reason.

    Samples are emitted at least once and carry a deterministic sample_id: dedupe by it.

    Give each worker on one machine its own --data-dir and --web-port. Ctrl-C stops cleanly.
    """
    try:
        resolved = adapter_from_spec(adapter)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--adapter") from exc
    from agl_events.processors.samples import default_data_dir, run_worker  # faust is heavy: import only to run

    cfg = settings(ctx)
    cfg = cfg.model_copy(update={"bootstrap": ensure_broker(cfg)})
    run_worker(cfg, data_dir or default_data_dir(cfg), resolved, web_port, loglevel)

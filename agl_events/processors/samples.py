"""The samples processor: a faust-streaming app that turns finished rollouts into training samples.

It reads the span topic only, as consumer group `agl-samples-<experiment>` (its workers share the six
span partitions, independently of the view processor), buffers each rollout attempt's spans in
partition-local RocksDB, and when the rollout's `RolloutFinished` arrives (after all its spans, in the
same partition) folds the attempt's spans through the configured adapter into a `SampleAdded` on
`agl.<experiment>.samples`, keyed by rollout id. A rollout the adapter cannot handle goes to the DLQ
with the reason in headers, and the worker carries on. Why each sample is emitted effectively once:
`agl_events.processors.sampler`; where its partitions resume after a restart: `agl_events.processors.app`.

Run it with `agl-events samples --adapter SPEC`, or `python -m agl_events.processors.samples --adapter SPEC`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import faust
from faust.types import AppT, StreamT
from faust.web import Request, Response, View

from agl_events.adapter.build import DEFAULT_ADAPTER, adapter_from_spec
from agl_events.config import Settings
from agl_events.processors import app as worker_app
from agl_events.processors.app import BATCH_MAX, BATCH_WITHIN, new_app
from agl_events.processors.context import raw_records
from agl_events.processors.metrics import WorkerFigures, add_metrics_page
from agl_events.processors.sampler import SamplesContext, build_samples_context, sample_records
from agl_events.samples.build import Adapter

log = logging.getLogger(__name__)

#: Default port of the worker's HTTP endpoints: next to the view processor's 6066.
WEB_PORT = 6067


def app_id(experiment: str) -> str:
    """The consumer group (and faust app id) shared by every samples worker of an experiment."""
    return f"agl-samples-{experiment}"


def create_app(settings: Settings, data_dir: Path, adapter: Adapter, web_port: int = WEB_PORT, *,
               context: SamplesContext | None = None) -> faust.App:
    """The samples app of `settings.experiment`, its state under `data_dir`, serving on `web_port`."""
    ctx = context or build_samples_context(settings, data_dir, adapter)
    app = new_app(app_id(settings.experiment), settings, data_dir, web_port, ctx.states)
    source = app.topic(ctx.topic, key_serializer="raw", value_serializer="raw")

    @app.on_before_shutdown.connect
    async def on_shutdown(sender: AppT, **_: Any) -> None:
        """Streams are drained by now: close every partition's state, flush the producer."""
        await ctx.close()

    @app.agent(source, name="agl-samples")
    async def sample(stream: StreamT[bytes]) -> None:
        """Fold, emit, commit: each batch's finished rollouts become samples before positions move on."""
        async for events in stream.take_events(BATCH_MAX, BATCH_WITHIN):
            try:
                await sample_records(ctx, raw_records(events))
            except Exception as exc:
                # faust would restart the agent on the next batch, skipping this one: stop instead, and
                # let the restarted worker resume from the positions stored before this batch.
                log.critical("samples worker stopping: %s: %s", type(exc).__name__, exc)
                await app.crash(exc)
                return

    add_metrics_page(app, WorkerFigures(
        "samples", settings.experiment, ctx.states, lambda: ctx.counters.folded,
        lambda: ctx.counters.dead_lettered + ctx.counters.undecodable, samples=lambda: ctx.counters.sampled))

    @app.page("/samples/stats")
    async def stats(web: View, request: Request) -> Response:
        """This worker's partitions, each with its next offset, buffered spans and sampled attempts."""
        return web.json(stats_payload(ctx))

    return app


def stats_payload(ctx: SamplesContext) -> dict[str, Any]:
    """What `GET /samples/stats` answers (JSON-ready)."""
    partitions = []
    for topic, partition in sorted(ctx.states.assigned):
        buffer = ctx.states.view(topic, partition)
        if buffer is not None:
            partitions.append({"topic": topic, "partition": partition,
                               "next_offset": buffer.positions.get((topic, partition), 0), **buffer.stats()})
    return {
        "experiment": ctx.experiment,
        "adapter": ctx.adapter,
        "assigned": [[topic, partition] for topic, partition in sorted(ctx.states.assigned)],
        "partitions": partitions,
        "counters": asdict(ctx.counters),
    }


def run_worker(settings: Settings, data_dir: Path, adapter: Adapter, web_port: int = WEB_PORT,
               loglevel: str = "warning") -> None:
    """Run one worker in the foreground until SIGINT/SIGTERM (see `agl_events.processors.app.run_worker`)."""
    worker_app.run_worker(settings, data_dir, lambda: create_app(settings, data_dir, adapter, web_port), loglevel)


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m agl_events.processors.samples`: one worker, configured by flags or `AGL_*` variables."""
    parser = worker_app.worker_parser("python -m agl_events.processors.samples", __doc__.splitlines()[0], WEB_PORT,
                                       data_dir="<home>/samples/<experiment>")
    parser.add_argument("--adapter", default=DEFAULT_ADAPTER,
                        help="the adapter: a short name (TracerTraceToTriplet, LlmProxyTraceToTriplet, "
                             f"TraceToMessages) or a TraceAdapter class's import path (default {DEFAULT_ADAPTER})")
    args = parser.parse_args(argv)
    try:
        adapter = adapter_from_spec(args.adapter)
    except ValueError as exc:
        parser.error(str(exc))
    worker_app.stop_with_parent(args)
    settings = worker_app.worker_settings(args)
    run_worker(settings, args.data_dir or default_data_dir(settings), adapter, args.web_port, args.loglevel)


def default_data_dir(settings: Settings) -> Path:
    return settings.home / "samples" / settings.experiment


if __name__ == "__main__":
    main()

"""The view processor: a faust-streaming app that folds an experiment's view topics into per-partition views.

Several workers (processes, on one machine or many) run the same app id, `agl-processor-<experiment>`,
so they form one consumer group and Kafka spreads the partitions of the view topics (rollouts,
attempts, spans, resources, workers) over them. Each worker folds the events of its partitions with
the store's own reducers (`StoreView.apply_logged`) into one RocksDB view per (topic, partition).

Positions: each view stores its next offset with its state, and the worker seeks there on every
assignment, never to the group's committed offset (see `agl_events.processors.app`): a worker that takes over a
partition it never held rebuilds it from the log, one restarted after `kill -9` resumes exactly after
the last batch it wrote. Events delivered twice are skipped by `apply_logged`.

Run it with `agl-events processor`, or `python -m agl_events.processors.views --experiment X --data-dir D`.
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

from agl_events.config import Settings
from agl_events.processors import app as worker_app
from agl_events.processors.app import BATCH_MAX, BATCH_WITHIN, new_app
from agl_events.processors.context import ProcessorContext, build_context, fold_records, raw_records
from agl_events.processors.metrics import WorkerFigures, add_metrics_page
from agl_events.processors.partition_views import summed_counts
from agl_events.reducers import keys
from agl_events.topics import Topic, partition_of, topic_name

log = logging.getLogger(__name__)


def app_id(experiment: str) -> str:
    """The consumer group (and faust app id) shared by every processor worker of an experiment."""
    return f"agl-processor-{experiment}"


def create_app(settings: Settings, data_dir: Path, web_port: int = 6066, *,
               context: ProcessorContext | None = None) -> faust.App:
    """The processor app of `settings.experiment`, keeping its views under `data_dir`, serving on `web_port`.

    Needs the experiment's topics to exist (`run_worker` creates them); the app itself declares no
    topic and uses no table, so nothing but the consumer group is created on the broker.
    """
    experiment = settings.experiment
    ctx = context or build_context(settings.bootstrap_servers, experiment, data_dir, settings.schema_registry_url)
    app = new_app(app_id(experiment), settings, data_dir, web_port, ctx.views)
    source = app.topic(*ctx.topics, key_serializer="raw", value_serializer="raw")

    @app.on_before_shutdown.connect
    async def on_shutdown(sender: AppT, **_: Any) -> None:
        """Streams are drained by now: flush dead letters and close every view."""
        await ctx.close()

    @app.agent(source, name="agl-fold-views")
    async def fold_views(stream: StreamT[bytes]) -> None:
        """Decode, reduce, write: each batch folds into the views of its partitions."""
        async for events in stream.take_events(BATCH_MAX, BATCH_WITHIN):
            await fold_records(ctx, raw_records(events))

    add_metrics_page(app, WorkerFigures("views", experiment, ctx.views, lambda: ctx.counters.folded,
                                        lambda: ctx.counters.dead_lettered))

    @app.page("/views/stats")
    async def stats(web: View, request: Request) -> Response:
        """This worker's assigned partitions, each with its next offset and entity counts, and totals."""
        return web.json(stats_payload(ctx))

    @app.page("/views/rollouts/{rollout_id}")
    async def rollout(web: View, request: Request, rollout_id: str) -> Response:
        """The rollout as this worker's view holds it, or 404 when another worker owns its partition.

        Finding the owner: every event of a rollout is keyed by its id, so the rollout lives in partition
        `partition_of(rollout_id, n)` of the rollouts topic (CRC-32 of the key modulo the partition count:
        librdkafka's default `consistent_random` partitioner, which our producers use; not murmur2). The
        404 names that partition; `GET /views/stats` of each worker lists the partitions it holds. With
        a handful of workers the simpler way is to ask each of them and keep the one answer that is 200.
        """
        rollouts_topic = topic_name(experiment, Topic.ROLLOUTS)
        for topic, partition in sorted(ctx.views.assigned):
            if topic != rollouts_topic:
                continue
            view = ctx.views.view(topic, partition)
            found = None if view is None else view.get(keys.rollout(rollout_id))
            if found is not None:
                return web.json(found)
        partitions = await ctx.partition_count(rollouts_topic)
        owner = partition_of(rollout_id, partitions) if partitions else None
        return web.error(404, "rollout not held by this worker", rollout_id=rollout_id,
                         topic=rollouts_topic, partition=owner)

    return app


def stats_payload(ctx: ProcessorContext) -> dict[str, Any]:
    """What `GET /views/stats` answers (JSON-ready)."""
    partitions = ctx.views.stats()
    return {
        "experiment": ctx.experiment,
        "assigned": [[topic, partition] for topic, partition in sorted(ctx.views.assigned)],
        "partitions": partitions,
        "counts": summed_counts(partitions),
        "counters": asdict(ctx.counters),
    }


def run_worker(settings: Settings, data_dir: Path, web_port: int = 6066, loglevel: str = "warning") -> None:
    """Run one worker in the foreground until SIGINT/SIGTERM (see `agl_events.processors.app.run_worker`)."""
    worker_app.run_worker(settings, data_dir, lambda: create_app(settings, data_dir, web_port), loglevel)


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m agl_events.processors.views`: one worker, configured by flags or `AGL_*` variables."""
    parser = worker_app.worker_parser("python -m agl_events.processors.views", __doc__.splitlines()[0], web_port=6066,
                                       data_dir="<home>/processor/<experiment>")
    args = parser.parse_args(argv)
    worker_app.stop_with_parent(args)
    settings = worker_app.worker_settings(args)
    run_worker(settings, args.data_dir or default_data_dir(settings), args.web_port, args.loglevel)


def default_data_dir(settings: Settings) -> Path:
    return settings.home / "processor" / settings.experiment


if __name__ == "__main__":
    main()

"""The view processor: a faust-streaming app that folds an experiment's view topics into per-partition views.

Several workers (processes, on one machine or many) run the same app id, `agl-processor-<experiment>`,
so they form one consumer group and Kafka spreads the partitions of the view topics (rollouts,
attempts, spans, resources, workers) over them. Each worker folds the events of its partitions with
the store's own reducers (`StoreView.apply_logged`) into one RocksDB view per (topic, partition).

Positions: the view's own stored offset is the truth, never the group's committed offset. faust seeks
every assigned partition "to the committed offset" after each rebalance (`Consumer.perform_seek`, from
table recovery, and again whenever it fetched while flow was stopped). `ViewPositionedConsumer`
answers that seek with the view's next offset (0 for an empty or deleted view), so a worker that takes
over a partition it never held rebuilds it from the log, and one restarted after `kill -9` resumes
exactly after the last batch it wrote. Events delivered twice are skipped by `apply_logged`. faust
still commits offsets as it acks; they only serve lag monitoring.

Run it with `agl-events processor`, or `python -m processors.views --experiment X --data-dir D`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import faust
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from faust.transport.drivers.aiokafka import Transport as AIOKafkaTransport
from faust.types import TP, AppT, EventT, StreamT
from faust.types.transports import ConsumerCallback, ConsumerT
from faust.web import Request, Response, View

from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.reducers import keys
from agl_events.topics import Topic, topic_name
from processors.context import ProcessorContext, RawRecord, build_context, fold_records
from processors.partition_views import PartitionViews, partition_of, summed_counts

log = logging.getLogger(__name__)

#: Events per fold: one RocksDB write batch per partition per fold. Decoding and folding in Python is
#: the ceiling, so batches amortise the per-call overhead; `BATCH_WITHIN` bounds the latency.
BATCH_MAX = 2000
BATCH_WITHIN = 0.2

#: Session timeout (s): how long a worker killed with -9 keeps its partitions before the group moves
#: them. Heartbeats come from aiokafka's own thread, so a busy fold does not count against it.
SESSION_TIMEOUT = 10.0


def app_id(experiment: str) -> str:
    """The consumer group (and faust app id) shared by every processor worker of an experiment."""
    return f"agl-processor-{experiment}"


class ViewPositionedConsumer(AIOKafkaConsumer):
    """faust's aiokafka consumer, except that "seek to committed" means "seek to the view's position".

    faust calls `seek_to_committed` (via `perform_seek`) after every assignment, before it resumes the
    streams, and again if it fetched while flow was stopped. Overriding that one call covers every path
    where faust would otherwise move a partition to the group's committed offset, which can be ahead
    of a view that was deleted, or that never lived on this worker.
    """

    views: PartitionViews | None = None

    async def seek_to_committed(self) -> Mapping[TP, int]:
        assignment = self.assignment()
        if self.views is None:
            return await super().seek_to_committed()
        positions = self.views.positions((tp.topic, tp.partition) for tp in assignment)
        targets: dict[TP, int] = {tp: positions[(tp.topic, tp.partition)]
                                  for tp in assignment if (tp.topic, tp.partition) in positions}
        result: dict[TP, int] = {}
        if len(targets) < len(assignment):  # not a view partition we hold (none expected): faust's way
            log.warning("no view position for %s; seeking those to committed offsets",
                        sorted(set(assignment) - targets.keys()))
            result.update(await super().seek_to_committed())
        if targets:
            await self.seek_wait(targets)
            log.info("seeked to view positions: %s",
                     ", ".join(f"{tp.topic}[{tp.partition}]@{o}" for tp, o in sorted(targets.items())))
        result.update(targets)
        return result


class ProcessorTransport(AIOKafkaTransport):
    """The aiokafka transport, handing its consumer the registry of views it seeks by."""

    Consumer = ViewPositionedConsumer

    def __init__(self, url: Any, app: AppT, views: PartitionViews) -> None:
        super().__init__(url, app)
        self.views = views

    def create_consumer(self, callback: ConsumerCallback, **kwargs: Any) -> ConsumerT:
        consumer = super().create_consumer(callback, **kwargs)
        if isinstance(consumer, ViewPositionedConsumer):
            consumer.views = self.views
        return consumer


def _positions(tps: Iterable[TP]) -> list[tuple[str, int]]:
    return [(tp.topic, tp.partition) for tp in tps]


def create_app(settings: Settings, data_dir: Path, web_port: int = 6066, *,
               context: ProcessorContext | None = None) -> faust.App:
    """The processor app of `settings.experiment`, keeping its views under `data_dir`, serving on `web_port`.

    Needs the experiment's topics to exist (`run_worker` creates them); the app itself declares no
    topic and uses no table, so nothing but the consumer group is created on the broker.
    """
    experiment = settings.experiment
    bootstrap = settings.bootstrap_servers
    ctx = context or build_context(bootstrap, experiment, data_dir, settings.schema_registry_url)
    app = faust.App(
        app_id(experiment),
        broker=[f"kafka://{server.strip()}" for server in bootstrap.split(",")],
        store="memory://",  # no tables: our state is in the per-partition views, not faust's stores
        datadir=str(data_dir / "faust"),
        topic_replication_factor=1,  # single-node brokers; faust declares nothing anyway (below)
        topic_allow_declare=False,  # our topics exist (create_topics), faust must not create or alter them
        topic_disable_leader=True,  # no leader-only timers, so no `<app>-__assignor-__leader` topic
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=SESSION_TIMEOUT,
        broker_heartbeat_interval=SESSION_TIMEOUT / 5,
        web_enabled=True,
        web_port=web_port,
        web_host="localhost",
    )
    # Before anything touches app.transport (app.topic builds the conductor, which builds it).
    app.transport = ProcessorTransport(app.conf.broker_consumer, app, ctx.views)
    source = app.topic(*ctx.topics, key_serializer="raw", value_serializer="raw")

    @app.on_partitions_revoked.connect
    async def on_revoked(sender: AppT, revoked: set[TP], **_: Any) -> None:
        """Close the views of partitions given up, so their next owner can open the RocksDB folders."""
        ctx.views.revoke(_positions(revoked))

    @app.on_partitions_assigned.connect
    async def on_assigned(sender: AppT, assigned: set[TP], **_: Any) -> None:
        """Record the new assignment; the seek to view positions follows in `seek_to_committed`."""
        ctx.views.assign(_positions(assigned))
        log.info("assigned %d partitions: %s", len(assigned), sorted(_positions(assigned)))

    @app.on_before_shutdown.connect
    async def on_shutdown(sender: AppT, **_: Any) -> None:
        """Streams are drained by now: flush dead letters and close every view."""
        await ctx.close()

    @app.agent(source, name="agl-fold-views")
    async def fold_views(stream: StreamT[bytes]) -> None:
        """Decode, reduce, write: each batch folds into the views of its partitions."""
        async for events in stream.take_events(BATCH_MAX, BATCH_WITHIN):
            await fold_records(ctx, _records(events))

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


def _records(events: Sequence[EventT]) -> list[RawRecord]:
    return [RawRecord.of(event.message) for event in events]


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
    """Create the topics (idempotent) on `settings.bootstrap_servers`, run a worker until stopped.

    Runs in the foreground; SIGINT/SIGTERM (Ctrl-C) stop it cleanly: streams drain, offsets are
    committed, the group is left, views are closed. Raises SystemExit when done, as faust workers do.
    """
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    data_dir.mkdir(parents=True, exist_ok=True)
    app = create_app(settings, data_dir, web_port)
    worker = faust.Worker(app, loglevel=loglevel, quiet=loglevel.lower() not in ("info", "debug"))
    worker.execute_from_commandline()


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m processors.views`: one worker, configured by flags or `AGL_*` variables."""
    parser = argparse.ArgumentParser(prog="python -m processors.views", description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=None, help="experiment (default: AGL_EXPERIMENT or 'default')")
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers (default: the local broker)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where the views live (default: <home>/processor/<experiment>)")
    parser.add_argument("--web-port", type=int, default=6066)
    parser.add_argument("--loglevel", default="warning")
    args = parser.parse_args(argv)
    settings = Settings.from_env(experiment=args.experiment, bootstrap=args.bootstrap)
    settings = settings.model_copy(update={"bootstrap": ensure_broker(settings)})  # a command may start it
    data_dir = args.data_dir or default_data_dir(settings)
    run_worker(settings, data_dir, args.web_port, args.loglevel)


def default_data_dir(settings: Settings) -> Path:
    return settings.home / "processor" / settings.experiment


if __name__ == "__main__":
    main()

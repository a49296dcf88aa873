"""What every processor app shares: a faust app whose partitions resume from their own stored positions.

The view processor and the samples processor are the same kind of worker: a faust consumer group over
some of an experiment's topics, each assigned partition folded into partition-local RocksDB state
(`PartitionStates`) that stores its next offset in the same write batch as the state itself.

Positions: that stored offset is the truth, never the group's committed offset. faust seeks every
assigned partition "to the committed offset" after each rebalance (`Consumer.perform_seek`, from table
recovery, and again whenever it fetched while flow was stopped). `PositionedConsumer` answers that seek
with the state's next offset (0 for an empty or deleted folder), so a worker that takes over a
partition it never held rebuilds it from the log, and one restarted after `kill -9` resumes exactly
after the last batch it wrote. faust still commits offsets as it acks; they only serve lag monitoring.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import faust
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from faust.transport.drivers.aiokafka import Transport as AIOKafkaTransport
from faust.types import TP, AppT
from faust.types.auth import CredentialsT
from faust.types.transports import ConsumerCallback, ConsumerT

from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.kafka_config import aiokafka_security, connection_config
from agl_events.proc.parent import stop_when_orphaned
from agl_events.processors.partition_views import PartitionStates, Position
from agl_events.topics import LAYOUT

log = logging.getLogger(__name__)

#: Events per fold: one RocksDB write batch per partition per fold. Decoding and folding in Python is
#: the ceiling, so batches amortise the per-call overhead; `BATCH_WITHIN` bounds the latency.
BATCH_MAX = 2000
BATCH_WITHIN = 0.2

#: Session timeout (s): how long a worker killed with -9 keeps its partitions before the group moves
#: them. Heartbeats come from aiokafka's own thread, so a busy fold does not count against it.
SESSION_TIMEOUT = 10.0
#: Seconds a worker assigned nothing waits for a rebalance before it looks at its whole group (see
#: `_exit_if_the_group_holds_nothing`).
EMPTY_ASSIGNMENT_GRACE = 15.0


class PositionedConsumer(AIOKafkaConsumer):
    """faust's aiokafka consumer, except that "seek to committed" means "seek to the stored position".

    faust calls `seek_to_committed` (via `perform_seek`) after every assignment, before it resumes the
    streams, and again if it fetched while flow was stopped. Overriding that one call covers every path
    where faust would otherwise move a partition to the group's committed offset, which can be ahead
    of state that was deleted, or that never lived on this worker.
    """

    states: PartitionStates[Any] | None = None

    async def seek_to_committed(self) -> Mapping[TP, int]:
        assignment = self.assignment()
        if self.states is None:
            return await super().seek_to_committed()
        positions = self.states.positions((tp.topic, tp.partition) for tp in assignment)
        targets: dict[TP, int] = {tp: positions[(tp.topic, tp.partition)]
                                  for tp in assignment if (tp.topic, tp.partition) in positions}
        result: dict[TP, int] = {}
        if len(targets) < len(assignment):  # not a partition we hold (none expected): faust's way
            log.warning("no stored position for %s; seeking those to committed offsets",
                        sorted(set(assignment) - targets.keys()))
            result.update(await super().seek_to_committed())
        if targets:
            await self.seek_wait(targets)
            log.info("seeked to stored positions: %s",
                     ", ".join(f"{tp.topic}[{tp.partition}]@{o}" for tp, o in sorted(targets.items())))
        result.update(targets)
        return result


class PositionedTransport(AIOKafkaTransport):
    """The aiokafka transport, handing its consumer the registry of partition states it seeks by."""

    Consumer = PositionedConsumer

    def __init__(self, url: Any, app: AppT, states: PartitionStates[Any]) -> None:
        super().__init__(url, app)
        self.states = states

    def create_consumer(self, callback: ConsumerCallback, **kwargs: Any) -> ConsumerT:
        consumer = super().create_consumer(callback, **kwargs)
        if isinstance(consumer, PositionedConsumer):
            consumer.states = self.states
        return consumer


def positions_of(tps: Iterable[TP]) -> list[Position]:
    return [(tp.topic, tp.partition) for tp in tps]


def faust_credentials(config: Mapping[str, str]) -> CredentialsT | None:
    """The connection settings every agl-events client gets (`log.kafka_config`), as faust's credentials, so
    the workers reach a secured cluster like the rest; None for PLAINTEXT."""
    security = aiokafka_security(config)
    protocol = security.get("security_protocol")
    if protocol is None:
        return None
    if protocol == "SSL":
        return faust.SSLCredentials(security["ssl_context"])
    return faust.SASLCredentials(username=security["sasl_plain_username"], password=security["sasl_plain_password"],
                                 ssl_context=security.get("ssl_context"), mechanism=security["sasl_mechanism"])


def new_app(app_id: str, settings: Settings, data_dir: Path, web_port: int, states: PartitionStates[Any]
            ) -> faust.App:
    """A faust app (consumer group `app_id`) whose partitions seek to, and are kept in, `states`.

    It declares no topic and uses no table, so nothing but the consumer group is created on the broker;
    the experiment's topics must exist (`run_worker` creates them). Assignments open and close the
    states' folders; the caller adds its agent, pages and shutdown hook.
    """
    app = faust.App(
        app_id,
        broker=[f"kafka://{server.strip()}" for server in settings.bootstrap_servers.split(",")],
        broker_credentials=faust_credentials(connection_config()),
        store="memory://",  # no tables: our state is in the per-partition folders, not faust's stores
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
    app.transport = PositionedTransport(app.conf.broker_consumer, app, states)

    checks: set[asyncio.Future[None]] = set()  # pending looks at an empty assignment (kept from the collector)

    @app.on_partitions_revoked.connect
    async def on_revoked(sender: AppT, revoked: set[TP], **_: Any) -> None:
        """Close the folders of partitions given up, so their next owner can open them."""
        states.revoke(positions_of(revoked))

    @app.on_partitions_assigned.connect
    async def on_assigned(sender: AppT, assigned: set[TP], **_: Any) -> None:
        """Record the new assignment; the seek to stored positions follows in `seek_to_committed`."""
        states.assign(positions_of(assigned))
        log.info("assigned %d partitions: %s", len(assigned), sorted(positions_of(assigned)))
        if not assigned:
            check = asyncio.ensure_future(_exit_if_the_group_holds_nothing(app_id, settings, states))
            checks.add(check)
            check.add_done_callback(checks.discard)

    return app


async def _exit_if_the_group_holds_nothing(group: str, settings: Settings, states: PartitionStates[Any]) -> None:
    """End the worker (status 1, as a crash) when, `EMPTY_ASSIGNMENT_GRACE` after it was assigned nothing, it
    still holds nothing, no member of its group holds anything, and the experiment's topics have partitions.

    That is the state a rebalance during a broker restart leaves: the group leader's assignor ran on metadata
    that listed the topics without partitions ("Ignoring missing topic"), assigned nothing, and nothing makes
    it assign again, so the views stop following the log, silently (found by `agl-events chaos`). A restarted
    worker waits for the topics' leaders before it joins (`create_topics`). A worker that is merely one too
    many for the partitions is left alone: the others hold them."""
    await asyncio.sleep(EMPTY_ASSIGNMENT_GRACE)
    if states.assigned or not await asyncio.to_thread(_group_holds_nothing, group, settings):
        return
    log.critical("consumer group %s holds no partition of %s's topics although they have partitions (a "
                 "rebalance during a broker restart); exiting with status 1 for a supervisor to restart this "
                 "worker", group, settings.experiment)
    logging.shutdown()
    os._exit(1)


def _group_holds_nothing(group: str, settings: Settings, timeout: float = 10.0) -> bool:
    admin = make_admin(settings.bootstrap_servers)
    names = [spec.name(settings.experiment) for spec in LAYOUT]
    topics = admin.list_topics(timeout=timeout).topics
    if not all(name in topics and topics[name].partitions for name in names):
        return False
    [described] = admin.describe_consumer_groups([group], request_timeout=timeout).values()
    return not any(member.assignment.topic_partitions for member in described.result(timeout).members)


def run_worker(settings: Settings, data_dir: Path, build: Callable[[], faust.App], loglevel: str) -> None:
    """Create the topics (idempotent) on `settings.bootstrap_servers`, run `build()`'s app until stopped.

    Runs in the foreground; SIGINT/SIGTERM (Ctrl-C) stop it cleanly: streams drain, offsets are
    committed, the group is left, folders are closed. Raises SystemExit when done, as faust workers do.
    """
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    data_dir.mkdir(parents=True, exist_ok=True)
    worker = faust.Worker(build(), loglevel=loglevel, quiet=loglevel.lower() not in ("info", "debug"))
    worker.execute_from_commandline()


def worker_parser(prog: str, description: str, web_port: int, data_dir: str) -> argparse.ArgumentParser:
    """The flags every `python -m processors.<app>` takes (its own are added by the caller); `data_dir` says
    where the partition folders go by default."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--experiment", default=None, help="experiment (default: AGL_EXPERIMENT or 'default')")
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers (default: the local broker)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help=f"where the partition folders live (default: {data_dir})")
    parser.add_argument("--web-port", type=int, default=web_port)
    parser.add_argument("--loglevel", default="warning")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="stop (as on SIGTERM) once this pid is no longer the worker's parent; a process that "
                             "starts the worker (`WorkerProcess`) passes its own, so its death leaves no worker")
    return parser


def stop_with_parent(args: argparse.Namespace) -> None:
    """Watch the parent `--parent-pid` names, if any (`proc.parent`)."""
    if args.parent_pid is not None:
        stop_when_orphaned(args.parent_pid)


def worker_settings(args: argparse.Namespace) -> Settings:
    """Settings from the parsed flags and `AGL_*` variables; starts the local broker when none is named."""
    settings = Settings.from_env(experiment=args.experiment, bootstrap=args.bootstrap)
    return settings.model_copy(update={"bootstrap": ensure_broker(settings)})


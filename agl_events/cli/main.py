"""The `agl-events` command line: global options, then one sub-command group per concern."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from agl_events.broker.reach import KafkaUnreachableError
from agl_events.cli.apo import apo_app
from agl_events.cli.bench import bench
from agl_events.cli.chaos import chaos
from agl_events.cli.demo import demo
from agl_events.cli.dlq import dlq_app
from agl_events.cli.experiments import experiments_app
from agl_events.cli.k8s import k8s_app
from agl_events.cli.kafka import kafka_app
from agl_events.cli.processor import processor
from agl_events.cli.produce import produce_app
from agl_events.cli.proxy import proxy
from agl_events.cli.replay import replay_app
from agl_events.cli.runner import runner_app
from agl_events.cli.samples import samples
from agl_events.cli.schemas import schemas_app
from agl_events.cli.store import store
from agl_events.cli.topics import topics_app
from agl_events.cli.up import down, status, supervise, up
from agl_events.config import Settings
from agl_events.log.kafka_config import CONFIG_FILE_ENV, KafkaConfigError, connection_config


class _Commands(TyperGroup):
    """The root command group: an unreachable cluster ends any command with its one-line message."""

    def invoke(self, ctx: typer.Context) -> object:
        try:
            return super().invoke(ctx)
        except KafkaUnreachableError as exc:
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(2) from exc


app = typer.Typer(
    cls=_Commands,
    name="agl-events",
    help="Agent Lightning's store on an Apache Kafka log.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(kafka_app, name="kafka")
app.add_typer(topics_app, name="topics")
app.add_typer(schemas_app, name="schemas")
app.add_typer(runner_app, name="runner")
app.add_typer(produce_app, name="produce")
app.add_typer(apo_app, name="apo")
app.add_typer(experiments_app, name="experiments")
app.add_typer(replay_app, name="replay")
app.add_typer(dlq_app, name="dlq")
app.add_typer(k8s_app, name="k8s")
app.command()(demo)
app.command()(bench)
app.command()(chaos)
app.command()(store)
app.command()(processor)
app.command()(samples)
app.command()(proxy)
app.command()(up)
app.command()(status)
app.command()(down)
app.command(hidden=True)(supervise)


@app.callback()
def main(
    ctx: typer.Context,
    bootstrap: Annotated[
        str | None,
        typer.Option("--bootstrap", envvar="AGL_KAFKA_BOOTSTRAP", help="Kafka bootstrap servers. "
                     "Unset: use the local broker, starting it when needed."),
    ] = None,
    experiment: Annotated[
        str, typer.Option("--experiment", envvar="AGL_EXPERIMENT", help="Experiment namespace of the topics.")
    ] = "default",
    schema_registry: Annotated[
        str | None,
        typer.Option("--schema-registry", envvar="AGL_SCHEMA_REGISTRY_URL",
                     help="Confluent Schema Registry URL; unset: self-describing Avro single-object encoding."),
    ] = None,
    kafka_timeout: Annotated[
        float | None,
        typer.Option("--kafka-timeout", envvar="AGL_KAFKA_TIMEOUT", min=0.1,
                     help="Seconds to wait for a configured cluster to answer before giving up (default 10)."),
    ] = None,
    home: Annotated[
        Path | None, typer.Option("--home", envvar="AGL_HOME", help="Where local broker data and logs live.")
    ] = None,
    kafka_config: Annotated[
        Path | None,
        typer.Option("--kafka-config", envvar=CONFIG_FILE_ENV, dir_okay=False,
                     help="Kafka connection settings for every client (SASL, SSL): a .properties file or a JSON "
                          "object of librdkafka settings; single ones also as AGL_KAFKA_CONF_<NAME> variables."),
    ] = None,
) -> None:
    if kafka_config is not None:  # the environment carries it to every client, spawned runners and workers too
        os.environ[CONFIG_FILE_ENV] = str(kafka_config.resolve())
    try:
        connection_config()  # a broken file or variable is one line now, not an error deep in a client
    except KafkaConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--kafka-config") from exc
    try:
        ctx.obj = Settings.from_env(
            bootstrap=bootstrap, experiment=experiment, schema_registry_url=schema_registry, home=home,
            kafka_timeout=kafka_timeout,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc

"""The `agl-events` command line: global options, then one sub-command group per concern."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Annotated

import click
import typer
from typer.core import TyperGroup

from agl_events.broker.reach import KafkaUnreachableError
from agl_events.config import Settings
from agl_events.log.kafka_config import CONFIG_FILE_ENV, KafkaConfigError, connection_config

#: Every sub-command, in the order `--help` lists them, and where it lives. A command's module is imported only
#: when that command runs (or `--help` lists them all): together they import FastAPI, faust, torch and pyarrow,
#: about 1.5 s that `agl-events runner` or `produce` would otherwise pay at every start.
COMMANDS: dict[str, tuple[str, str]] = {
    "kafka": ("agl_events.cli.kafka", "kafka_app"),
    "topics": ("agl_events.cli.topics", "topics_app"),
    "schemas": ("agl_events.cli.schemas", "schemas_app"),
    "runner": ("agl_events.cli.runner", "runner_app"),
    "produce": ("agl_events.cli.produce", "produce_app"),
    "apo": ("agl_events.cli.apo", "apo_app"),
    "train": ("agl_events.cli.train", "train_app"),
    "experiments": ("agl_events.cli.experiments", "experiments_app"),
    "replay": ("agl_events.cli.replay", "replay_app"),
    "dlq": ("agl_events.cli.dlq", "dlq_app"),
    "k8s": ("agl_events.cli.k8s", "k8s_app"),
    "demo": ("agl_events.cli.demo", "demo"),
    "bench": ("agl_events.cli.bench", "bench"),
    "chaos": ("agl_events.cli.chaos", "chaos"),
    "store": ("agl_events.cli.store", "store"),
    "processor": ("agl_events.cli.processor", "processor"),
    "samples": ("agl_events.cli.samples", "samples"),
    "proxy": ("agl_events.cli.proxy", "proxy"),
    "up": ("agl_events.cli.up", "up"),
    "status": ("agl_events.cli.up", "status"),
    "down": ("agl_events.cli.up", "down"),
    "supervise": ("agl_events.cli.up", "supervise"),
}
#: Run by `up` itself, not by a user.
HIDDEN = frozenset({"supervise"})


def load_command(name: str) -> click.Command:
    """The click command of one entry of COMMANDS, importing its module now."""
    module, attr = COMMANDS[name]
    target = vars(importlib.import_module(module))[attr]
    if isinstance(target, typer.Typer):
        group = typer.main.get_group(target)
        group.name = name
        return group
    single = typer.Typer()
    single.command(name=name, hidden=name in HIDDEN)(target)
    return typer.main.get_command(single)


class _Commands(TyperGroup):
    """The root command group: sub-commands loaded on use, and an unreachable cluster ends any command with its
    one-line message."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

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

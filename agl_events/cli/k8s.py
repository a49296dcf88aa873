"""`agl-events k8s topics`: the experiment's Strimzi KafkaTopic resources, rendered from the topic layout."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from agl_events.cli.context import settings
from agl_events.deploy.strimzi import DEFAULT_CLUSTER, TopicOptions, render_topics
from agl_events.topics import LAYOUT

k8s_app = typer.Typer(help="Kubernetes resources derived from the code (deploy/k8s uses them).",
                      no_args_is_help=True)


@k8s_app.command()
def topics(
    ctx: typer.Context,
    cluster: Annotated[str, typer.Option(help="The Strimzi Kafka resource the topics belong to.")] = DEFAULT_CLUSTER,
    replicas: Annotated[int | None, typer.Option(min=1, help="Replication factor of every topic "
                                                 "(unset: the cluster's default.replication.factor).")] = None,
    min_insync_replicas: Annotated[int | None, typer.Option(
        min=1, help="min.insync.replicas of every topic (default with --replicas: replicas - 1, between 1 and 2).")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", dir_okay=False, help="Write here instead of stdout.")] = None,
) -> None:
    """KafkaTopic resources for the experiment (--experiment): partitions and settings from agl_events/topics.py.

    No cluster is contacted. `agl-events k8s topics --out deploy/k8s/base/topics.yaml` regenerates the
    committed base file.
    """
    try:
        options = TopicOptions(experiment=settings(ctx).experiment, cluster=cluster, replicas=replicas,
                               min_insync_replicas=min_insync_replicas)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise typer.BadParameter(message, param_hint="--min-insync-replicas") from exc
    text = render_topics(options)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        typer.echo(f"wrote {len(LAYOUT)} KafkaTopic resources for experiment {options.experiment} to {out}")

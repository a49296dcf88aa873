"""What `agl-events status` reads, from Kafka and a store; it needs no supervisor (without one it shows these
alone).

- consumer lag per group and partition: each group's committed offsets (AdminClient) against the partitions'
  end offsets. The experiment's groups are the store's task-request ingest, the processor and samples
  workers, and the trainer's default group. The runners' share group is not among them: the admin client
  (confluent-kafka 2.16) cannot describe share groups; the queue shows as rollouts `queuing` instead.
- the end offsets of the span and samples topics, whose differences between two snapshots are spans/s and
  samples/s;
- from the store: rollouts by status (one count query per status, `limit=1`) and the latest resources.
"""

from __future__ import annotations

import time
from typing import get_args

import httpx

from agl_events.log.clients import LogError, make_admin, make_consumer
from agl_events.log.offsets import groups_committed, partitions_of, watermarks
from agl_events.runner.tasks import share_group
from agl_events.samples.stream import default_group
from agl_events.server.client import experiment_url
from agl_events.store.ingester import ingest_group
from agl_events.supervise.state import PartitionLag, Snapshot, StoreFigures, UpState
from agl_events.topics import Topic, topic_name
from agl_events.types import RolloutStatus


def experiment_groups(experiment: str) -> dict[str, str]:
    """group -> its role, for the consumer groups of `experiment`."""
    from agl_events.processors.samples import app_id as samples_app  # imports faust: only status pays for it
    from agl_events.processors.views import app_id as processor_app

    return {ingest_group(experiment): "store: task-requests ingest", processor_app(experiment): "processor workers",
            samples_app(experiment): "samples workers", default_group(experiment): "trainer (SampleStream)"}


#: What a snapshot says when there is no cluster to ask.
NO_LOCAL_BROKER = "the local broker is not running (`agl-events kafka start`, or set AGL_KAFKA_BOOTSTRAP)"


def take(bootstrap: str | None, experiment: str, store_url: str | None, state: UpState | None, *,
         auth_token: str | None = None, timeout: float = 5.0) -> Snapshot:
    """One snapshot; what cannot be read (Kafka, the store) is an error line in it, not an exception. `bootstrap`
    None: the local broker is not running, so nothing waits for it."""
    snapshot = Snapshot(experiment=experiment, taken_at=time.time(), state=state)
    try:
        if bootstrap is None:
            snapshot.kafka_error = NO_LOCAL_BROKER
        else:
            _read_kafka(snapshot, bootstrap, timeout)
    except (LogError, RuntimeError) as exc:
        snapshot.kafka_error = str(exc)
    if store_url is not None:
        snapshot.store = store_figures(store_url, experiment, auth_token, timeout)
    return snapshot


def _read_kafka(snapshot: Snapshot, bootstrap: str, timeout: float) -> None:
    experiment = snapshot.experiment
    consumer = make_consumer(bootstrap, None)
    try:
        ends = watermarks(consumer, partitions_of(consumer, [topic_name(experiment, Topic.SPANS),
                                                             topic_name(experiment, Topic.SAMPLES)], timeout),
                          timeout)
        groups = experiment_groups(experiment)
        committed = groups_committed(make_admin(bootstrap), groups, timeout)
        for position in {(topic, partition) for _, topic, partition in committed} - set(ends):
            ends.update(watermarks(consumer, [position], timeout))
    finally:
        consumer.close()
    spans, samples = topic_name(experiment, Topic.SPANS), topic_name(experiment, Topic.SAMPLES)
    snapshot.spans_end = sum(end for (topic, _), (_, end) in ends.items() if topic == spans)
    snapshot.samples_end = sum(end for (topic, _), (_, end) in ends.items() if topic == samples)
    snapshot.lags = [PartitionLag(group=group, role=groups[group], topic=topic, partition=partition, committed=offset,
                                  end=ends[(topic, partition)][1])
                     for (group, topic, partition), offset in sorted(committed.items())]
    held = {lag.group for lag in snapshot.lags}
    snapshot.group_notes = {group: f"{role}: no committed offsets (not running yet, or nothing consumed)"
                            for group, role in groups.items() if group not in held}
    snapshot.group_notes[share_group(experiment)] = ("runners (share group): not shown, the admin client cannot "
                                                     "describe share groups; the queue is the rollouts `queuing`")


def store_figures(url: str, experiment: str, auth_token: str | None = None, timeout: float = 5.0) -> StoreFigures:
    """Rollouts by status and the latest resources, from the store at `url`."""
    figures = StoreFigures(url=url)
    headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
    base = f"{experiment_url(url, experiment)}/v1/agl"
    try:
        with httpx.Client(base_url=base, timeout=timeout, headers=headers) as http:
            for status in get_args(RolloutStatus):
                response = http.get("/rollouts", params={"status_in": status, "limit": 1})
                response.raise_for_status()
                figures.rollouts[status] = int(response.json()["total"])
            latest = http.get("/resources/latest")
            latest.raise_for_status()
            if (found := latest.json()) is not None:
                figures.resources_id, figures.resources_version = found["resources_id"], found["version"]
            group = http.get("/statistics").json().get("store_group") or {}
            figures.owners = {int(p): owner for p, owner in group.get("owners", {}).items()}
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        figures.error = f"{type(exc).__name__}: {exc}"
    return figures

"""Topic administration through the AdminClient: idempotent creation of an experiment's layout, deletion.

The layout itself (names, partitions, configs and why) is pure data in `agl_events.topics`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType, TopicMetadata

from agl_events.log.records import Position
from agl_events.topics import LAYOUT, Replication, replication_for


def create_topics(admin: AdminClient, experiment: str, timeout: float = 30.0,
                  replication: Replication | None = None) -> dict[str, str]:
    """Create every topic of the experiment that does not exist yet; returns topic -> 'created'|'exists', or for
    an existing topic whose replication differs from the one wanted, 'exists' and how it differs.

    `replication` None: the one for the cluster met (`topics.replication_for` its broker count). Topics that exist
    are left as they are: ones created before every topic took MESSAGE_MAX_BYTES records keep the broker's limit
    (about 1 MiB) for all but spans, so a larger event fails when it is appended; ones created on a smaller
    cluster keep their replication (raising it is a partition reassignment, the operator's decision).
    """
    metadata = admin.list_topics(timeout=timeout)
    replication = replication or replication_for(len(metadata.brokers))
    existing = set(metadata.topics)
    wanted = [spec for spec in LAYOUT if spec.name(experiment) not in existing]
    result = {spec.name(experiment): "exists" for spec in LAYOUT if spec.name(experiment) in existing}
    for name, live in replication_of(admin, list(result), timeout).items():
        if live != replication:
            result[name] = f"exists with {live} ({replication} wanted: left as it is)"
    if wanted:
        futures = admin.create_topics(
            [NewTopic(spec.name(experiment), num_partitions=spec.partitions, replication_factor=replication.factor,
                      config={**spec.settings, **replication.settings}) for spec in wanted],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        for name, future in futures.items():
            try:
                future.result()
                result[name] = "created"
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # a concurrent creator won the race
                    raise
                result[name] = "exists"
    # New topics answer NOT_LEADER for a moment; a broker that has just started again lists its topics before
    # their partitions have leaders, and a client subscribing then (a faust worker's assignor) assigns nothing.
    wait_for_leaders(admin, list(result), timeout)
    return result


def wait_for_leaders(admin: AdminClient, topics: list[str], timeout: float) -> None:
    """Block until every partition of `topics` has a leader: a new topic answers NOT_LEADER for a moment."""
    _wait_for_metadata(admin, timeout, "topics without a leader", lambda meta: [
        t for t in topics if t not in meta or meta[t].error is not None
        or any(p.leader < 0 for p in meta[t].partitions.values())])


def _wait_for_metadata(admin: AdminClient, timeout: float, what: str,
                       pending: Callable[[dict[str, TopicMetadata]], list[str]]) -> None:
    """Ask the metadata again, a moment apart, until `pending(topics)` names none; `what` they are, if it still
    names some after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while left := pending(admin.list_topics(timeout=timeout).topics):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {timeout}s: {', '.join(left)}")
        time.sleep(0.1)


def replication_of(admin: AdminClient, topics: list[str], timeout: float = 30.0) -> dict[str, Replication]:
    """Each existing topic's replication as the cluster has it: its first partition's replica count and its
    min.insync.replicas (its own or the broker's default)."""
    meta = admin.list_topics(timeout=timeout).topics
    present = [t for t in topics if t in meta and meta[t].partitions]
    if not present:
        return {}
    found = {}
    for name, entries in _topic_configs(admin, present, timeout).items():
        factor = len(meta[name].partitions[0].replicas)
        found[name] = Replication(factor=factor, min_insync=min(int(entries["min.insync.replicas"].value), factor))
    return found


def _topic_configs(admin: AdminClient, topics: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    """Each topic's configuration entries. Asked again while the broker asked answers UNKNOWN_TOPIC_OR_PART: on a
    cluster, a topic just created reaches each broker's metadata a moment apart."""
    deadline, found, pending = time.monotonic() + timeout, {}, list(topics)
    while pending:
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in pending],
                                         request_timeout=timeout)
        for resource, future in futures.items():
            try:
                found[resource.name] = future.result(timeout)
            except KafkaException as exc:
                if exc.args[0].name() != "UNKNOWN_TOPIC_OR_PART" or time.monotonic() > deadline:
                    raise
        pending = [t for t in pending if t not in found]
        if pending:
            time.sleep(0.1)
    return found


def broker_ids(admin: AdminClient, timeout: float = 10.0) -> set[int]:
    """The ids of the brokers the cluster's metadata lists now (a fenced or stopped one is not listed)."""
    return set(admin.list_topics(timeout=timeout).brokers)


def under_replicated(admin: AdminClient, timeout: float = 10.0) -> list[Position]:
    """The partitions with fewer in-sync replicas than replicas, or no leader (a node is down or catching up)."""
    meta = admin.list_topics(timeout=timeout).topics
    return [(name, p.id) for name, topic in meta.items() for p in topic.partitions.values()
            if p.leader < 0 or len(p.isrs) < len(p.replicas)]


def partition_leaders(admin: AdminClient, topics: list[str], timeout: float = 10.0) -> dict[Position, int]:
    """The leader's broker id of each partition of `topics` (-1 while it has none)."""
    meta = admin.list_topics(timeout=timeout).topics
    return {(t, p.id): p.leader for t in topics if t in meta for p in meta[t].partitions.values()}


def end_offsets(admin: AdminClient, positions: list[Position], timeout: float = 5.0) -> dict[Position, int]:
    """Each partition's high watermark (the end of what every in-sync replica has: acknowledged acks=all writes),
    for the partitions whose leader answers within `timeout`; one between leaders is left out, not waited for."""
    asked = admin.list_offsets({TopicPartition(*pos): OffsetSpec.latest() for pos in positions},
                               request_timeout=timeout)
    found = {}
    for tp, future in asked.items():
        with contextlib.suppress(KafkaException, TimeoutError):  # no leader to ask yet: not answered
            found[(tp.topic, tp.partition)] = future.result(timeout).offset
    return found


def delete_topics(admin: AdminClient, prefix: str, timeout: float = 30.0) -> list[str]:
    """Delete every topic whose name starts with `prefix` (tests clean up their experiments with it); returns
    once the metadata no longer lists them. The deletion is acknowledged when the controller has it, and a
    broker's metadata can name the topics a moment longer: a listing right after (`experiments list`, a test)
    would still see them."""
    names = [t for t in admin.list_topics(timeout=timeout).topics if t.startswith(prefix)]
    if names:
        for future in admin.delete_topics(names, operation_timeout=timeout, request_timeout=timeout).values():
            future.result()
        _wait_for_metadata(admin, timeout, "topics still listed after their deletion",
                           lambda meta: [t for t in names if t in meta])
    return names


def create_topic(admin: AdminClient, name: str, partitions: int, timeout: float = 30.0,
                 replication_factor: int = -1) -> None:
    """Create one topic outside any experiment's layout (benchmarks' throwaway topics), and wait for its leaders;
    `replication_factor` -1: the broker's default."""
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)]
                        )[name].result(timeout)
    wait_for_leaders(admin, [name], timeout)


def delete_records(admin: AdminClient, before: Mapping[Position, int], timeout: float = 30.0) -> dict[Position, int]:
    """Delete each partition's records before the given offset (Kafka's DeleteRecords); returns where each
    partition's log now starts. Partitions given offset 0 are left alone."""
    wanted = [TopicPartition(t, p, end) for (t, p), end in before.items() if end > 0]
    if not wanted:
        return {}
    futures = admin.delete_records(wanted, request_timeout=timeout, operation_timeout=timeout)
    return {(tp.topic, tp.partition): future.result().low_watermark for tp, future in futures.items()}


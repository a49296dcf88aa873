"""Experiments as the broker holds them: which exist, how much each has logged, and deleting one.

An experiment is nothing but its topics, `agl.<experiment>.<suffix>` (agl_events.topics), so the broker is the
registry: an experiment exists while any topic of its layout does. Every figure here is read from the broker,
never from a view, so it holds for experiments no store on this machine has served:

- events: per partition, end minus start offset (on the compacted resources topic that counts the offsets
  compaction has emptied too: what was appended, not what is left);
- times: the record timestamps (CreateTime) of each partition's first record and its last, read by manual
  assignment, no consumer group;
- size: the brokers' own account of their log segments (`log.log_dirs`), unknown where the cluster will not say;
- model versions: the distinct resources ids on the resources topic, and the one published last.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec
from pydantic import BaseModel, computed_field

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.events.kinds import Kind
from agl_events.log.admin import delete_topics
from agl_events.log.clients import make_admin, make_consumer
from agl_events.log.consumer import raw_of
from agl_events.log.log_dirs import partition_sizes
from agl_events.log.records import Position, decode_record
from agl_events.topics import Topic, topic_name

log = logging.getLogger(__name__)

#: Topic suffixes in layout order, the order topics are listed in.
_SUFFIXES = {t.value: i for i, t in enumerate(Topic)}
#: The topic settings `describe` shows: what decides how long the log keeps an experiment.
_SHOWN_CONFIGS = ("cleanup.policy", "retention.ms")
_RESOURCES_KINDS = (Kind.RESOURCES_PUBLISHED, Kind.RESOURCES_UPDATED)
#: Fetch little per partition: most of each is skipped (a seek from its first record to its last), and what a
#: fetch brought before the seek is read for nothing. The broker still sends at least one whole record batch.
#: Measured on 4 experiments of ~95k events: 19k records read in 0.2 s, against 63k in 0.5-2 s at the default 1 MiB.
_EDGE_FETCH = {"max.partition.fetch.bytes": 64 * 1024}
#: What a partition answers for a moment after its topic was created, and for good once it was deleted.
_TRANSIENT = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT,
              KafkaError.UNKNOWN_TOPIC_OR_PART}


class UnknownExperimentError(LookupError):
    """No topic of the experiment's layout is on the cluster."""


class PartitionSummary(BaseModel):
    """One partition: the offsets it spans, its bytes on the brokers, its first and last record's time."""

    partition: int
    start: int
    end: int
    size_bytes: int | None = None
    first_time: datetime | None = None
    last_time: datetime | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def records(self) -> int:
        return self.end - self.start


class TopicSummary(BaseModel):
    """One topic of an experiment; `cleanup_policy` and `retention_ms` are read only by `describe_experiment`."""

    name: str
    partitions: list[PartitionSummary]
    cleanup_policy: str | None = None
    retention_ms: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def size_bytes(self) -> int | None:
        return _total(p.size_bytes for p in self.partitions)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def first_time(self) -> datetime | None:
        return min((p.first_time for p in self.partitions if p.first_time), default=None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def last_time(self) -> datetime | None:
        return max((p.last_time for p in self.partitions if p.last_time), default=None)


class ExperimentSummary(BaseModel):
    """An experiment on the cluster, totalled over its topics. `size_bytes` is None when the brokers did not
    report every partition's size."""

    name: str
    topics: list[TopicSummary]
    model_versions: int = 0
    latest_resources_id: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def topic_count(self) -> int:
        return len(self.topics)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def partitions(self) -> int:
        return sum(len(t.partitions) for t in self.topics)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def events(self) -> int:
        return sum(t.records for t in self.topics)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def size_bytes(self) -> int | None:
        return _total(t.size_bytes for t in self.topics)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def first_time(self) -> datetime | None:
        return min((t.first_time for t in self.topics if t.first_time), default=None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def last_time(self) -> datetime | None:
        return max((t.last_time for t in self.topics if t.last_time), default=None)


class DeletedExperiment(BaseModel):
    """What `delete_experiment` removed."""

    name: str
    topics: list[str]
    views: Path | None = None


def experiment_of(topic: str) -> str | None:
    """The experiment a topic belongs to, or None for a topic outside every experiment's layout.

    Experiment names hold no '.', so `agl.<experiment>.<suffix>` splits in exactly three."""
    parts = topic.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == "agl" and parts[2] in _SUFFIXES else None


def list_experiments(bootstrap: str, codec: AvroCodec, timeout: float = 30.0) -> list[ExperimentSummary]:
    """Every experiment on the cluster at `bootstrap`, by name."""
    return _summaries(bootstrap, codec, None, timeout)


def describe_experiment(bootstrap: str, codec: AvroCodec, experiment: str, timeout: float = 30.0
                        ) -> ExperimentSummary:
    """One experiment, with each topic's cleanup policy and retention; UnknownExperimentError if it has no topic."""
    found = _summaries(bootstrap, codec, experiment, timeout)
    if not found:
        raise UnknownExperimentError(f"no experiment {experiment!r} on {bootstrap} (no topic agl.{experiment}.*)")
    summary = found[0]
    configs = _topic_configs(make_admin(bootstrap), [t.name for t in summary.topics], timeout)
    for topic in summary.topics:
        topic.cleanup_policy = configs[topic.name].get("cleanup.policy")
        retention = configs[topic.name].get("retention.ms")
        topic.retention_ms = int(retention) if retention is not None else None
    return summary


def delete_experiment(bootstrap: str, experiment: str, views_root: Path, timeout: float = 30.0
                      ) -> DeletedExperiment:
    """Delete the experiment's topics and its local view folder `views_root/<experiment>`, if there is one.

    A store still serving the experiment is not stopped: its appends then fail, and a later one recreates empty
    topics. Deleting the view with the topics matters: a view left behind holds offsets past the new, empty
    topics' ends, and a store opened on it would wait for records that never come."""
    topics = delete_topics(make_admin(bootstrap), f"agl.{experiment}.", timeout)
    view = views_root / experiment
    if view.is_dir():
        shutil.rmtree(view)
        return DeletedExperiment(name=experiment, topics=sorted(topics), views=view)
    return DeletedExperiment(name=experiment, topics=sorted(topics))


def _summaries(bootstrap: str, codec: AvroCodec, only: str | None, timeout: float) -> list[ExperimentSummary]:
    """The summaries of every experiment (or of `only`): one metadata request, two batched offset requests, one
    pass over the partitions' edges (and the whole resources topics), one DescribeLogDirs per broker.

    A topic deleted while this runs (another experiment's delete) is left out rather than waited for."""
    admin = make_admin(bootstrap)
    meta = admin.list_topics(timeout=timeout).topics
    names = sorted((t for t in meta if (exp := experiment_of(t)) is not None and only in (None, exp)),
                   key=lambda t: (experiment_of(t), _SUFFIXES[t.rpartition(".")[2]]))
    ranges = _offset_ranges(admin, [(t, p) for t in names for p in sorted(meta[t].partitions)], timeout)
    scan = _EdgeScan(codec, {topic_name(exp, Topic.RESOURCES) for t in names if (exp := experiment_of(t))})
    consumer = make_consumer(bootstrap, None, **_EDGE_FETCH)
    try:
        _read(consumer, ranges, scan.record, timeout)
    finally:
        consumer.close()
    sizes = partition_sizes(bootstrap, ranges, timeout)
    by_experiment: dict[str, list[TopicSummary]] = {}
    for name in names:
        parts = [PartitionSummary(partition=p, start=start, end=end, size_bytes=sizes.get((t, p)),
                                  first_time=scan.first.get((t, p)), last_time=scan.last.get((t, p)))
                 for (t, p), (start, end) in ranges.items() if t == name]
        if parts:
            by_experiment.setdefault(experiment_of(name) or "", []).append(TopicSummary(name=name, partitions=parts))
    summaries = []
    for experiment, topics in by_experiment.items():
        ids = scan.resources_ids.get(topic_name(experiment, Topic.RESOURCES), {})
        summaries.append(ExperimentSummary(name=experiment, topics=topics, model_versions=len(ids),
                                           latest_resources_id=next(reversed(ids), None)))
    return summaries


def _offset_ranges(admin: AdminClient, positions: list[Position], timeout: float) -> dict[Position, tuple[int, int]]:
    """(start, end) offsets of each partition, in two batched ListOffsets requests. A partition of a topic just
    created may have no leader for a moment: asked again until `timeout`; one whose topic is gone is left out."""
    ranges: dict[Position, tuple[int, int]] = {}
    pending = positions
    deadline = time.monotonic() + timeout
    while pending:
        starts = _list_offsets(admin, pending, OffsetSpec.earliest(), timeout)
        ends = _list_offsets(admin, pending, OffsetSpec.latest(), timeout)
        retry = []
        for position in pending:
            try:
                ranges[position] = (starts[position].result().offset, ends[position].result().offset)
            except KafkaException as exc:
                if exc.args[0].code() not in _TRANSIENT or time.monotonic() > deadline:
                    raise
                retry.append(position)
        if retry:
            time.sleep(0.1)
            live = admin.list_topics(timeout=timeout).topics
            retry = [pos for pos in retry if pos[0] in live]
        pending = retry
    return ranges


def _list_offsets(admin: AdminClient, positions: list[Position], spec: OffsetSpec, timeout: float
                  ) -> dict[Position, Future[Any]]:
    asked = admin.list_offsets({TopicPartition(*pos): spec for pos in positions}, request_timeout=timeout)
    return {(tp.topic, tp.partition): future for tp, future in asked.items()}


class _EdgeScan:
    """What one pass over the log collects: each partition's first and last record time (it skips from the
    first record to the last), and the resources ids of the resources topics (read whole), in publication order:
    a dict keeps insertion order, and an id published again moves to the end."""

    def __init__(self, codec: AvroCodec, resources_topics: set[str]) -> None:
        self.codec = codec
        self.resources_topics = resources_topics
        self.first: dict[Position, datetime | None] = {}
        self.last: dict[Position, datetime | None] = {}
        self.resources_ids: dict[str, dict[str, None]] = {}

    def record(self, consumer: Consumer, msg: Message, end: int) -> None:
        position, offset, stamp = (msg.topic() or "", msg.partition() or 0), msg.offset() or 0, _stamp(msg)
        if position not in self.first:
            self.first[position] = stamp
            if offset < end - 1 and position[0] not in self.resources_topics:
                consumer.seek(TopicPartition(*position, end - 1))
        self.last[position] = stamp
        if position[0] in self.resources_topics:
            self._resources(position[0], msg)

    def _resources(self, topic: str, msg: Message) -> None:
        try:
            event = decode_record(self.codec, raw_of(msg))
        except CodecError as exc:
            log.warning("undecodable record at %s[%d]@%d: %s", topic, msg.partition(), msg.offset(), exc)
            return
        if event.kind in _RESOURCES_KINDS:
            ids = self.resources_ids.setdefault(topic, {})
            ids.pop(event.record["resources"]["resources_id"], None)
            ids[event.record["resources"]["resources_id"]] = None


def _read(consumer: Consumer, ranges: Mapping[Position, tuple[int, int]],
          on_record: Callable[[Consumer, Message, int], None], timeout: float) -> None:
    """Hand every record of each non-empty partition, from its start to its record at end - 1, to
    `on_record(consumer, record, end)`, which may seek the partition forward. Manual assignment, no group.

    A partition is done at its last record, or at its end (compaction can leave offsets without records), or
    when its topic is gone; one not done by `timeout` keeps what was read."""
    pending = {pos: end for pos, (start, end) in ranges.items() if end > start}
    if not pending:
        return
    consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in pending])
    deadline = time.monotonic() + timeout
    try:
        while pending and time.monotonic() < deadline:
            batch = consumer.consume(1000, 0.1)
            if not batch:
                live = consumer.list_topics(timeout=timeout).topics
                for position in [pos for pos in pending if pos[0] not in live]:
                    del pending[position]
            for msg in batch:
                position = (msg.topic() or "", msg.partition() or 0)
                if position not in pending:
                    continue
                error = msg.error()
                if error is not None:
                    if error.code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                        del pending[position]
                    continue
                on_record(consumer, msg, pending[position])
                if (msg.offset() or 0) >= pending[position] - 1:
                    del pending[position]
    finally:
        consumer.unassign()
    if pending:
        log.warning("not read to the end within %gs: %s", timeout, ", ".join(f"{t}[{p}]" for t, p in pending))


def _stamp(msg: Message) -> datetime | None:
    kind, millis = msg.timestamp()
    return None if kind == TIMESTAMP_NOT_AVAILABLE else datetime.fromtimestamp(millis / 1000, UTC)


def _topic_configs(admin: AdminClient, topics: list[str], timeout: float) -> dict[str, dict[str, str]]:
    """The shown settings of each topic, as the broker resolves them (its defaults where the topic sets none)."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in topics]
    futures = admin.describe_configs(resources, request_timeout=timeout)
    return {resource.name: {key: entry.value for key, entry in future.result().items() if key in _SHOWN_CONFIGS}
            for resource, future in futures.items()}


def _total(values: Iterable[int | None]) -> int | None:
    """The sum, or None if any value is unknown: a partial total would read as the whole."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total

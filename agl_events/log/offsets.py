"""Where partitions start and end, and which offset a point in time falls at: the broker's answers a replay
needs to decide how far to read. Retries the transient errors a just-created topic answers with."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from agl_events.log.clients import AdminClient
from agl_events.log.consumer import is_end, raw_of
from agl_events.log.records import Position, RawRecord

T = TypeVar("T")
_TRANSIENT = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT}


def _retrying(call: Callable[[], T], timeout: float) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as exc:
            if exc.args[0].code() not in _TRANSIENT or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def partitions_of(consumer: Consumer, topics: Iterable[str], timeout: float = 10.0) -> list[Position]:
    """Every partition of `topics`; a missing topic is an error that says how to make it."""
    meta = _retrying(lambda: consumer.list_topics(timeout=timeout), timeout)
    found: list[Position] = []
    for topic in topics:
        info = meta.topics.get(topic)
        if info is None or info.error is not None:
            raise RuntimeError(f"topic {topic} does not exist; run `agl-events topics create`")
        found.extend((topic, p) for p in sorted(info.partitions))
    return found


def watermarks(consumer: Consumer, positions: Iterable[Position], timeout: float = 30.0
               ) -> dict[Position, tuple[int, int]]:
    """(log start, log end) of each partition: the first offset retention kept, and the next append's."""
    return {pos: _retrying(lambda pos=pos: consumer.get_watermark_offsets(TopicPartition(*pos), timeout=timeout),
                           timeout)
            for pos in positions}


def offsets_at(consumer: Consumer, positions: Iterable[Position], epoch_ms: int, timeout: float = 30.0
               ) -> dict[Position, int]:
    """Per partition, the first offset whose record timestamp is at or after `epoch_ms` (the log end when none
    is): reading up to it reads exactly the records stamped before `epoch_ms`."""
    wanted = list(positions)
    found = _retrying(lambda: consumer.offsets_for_times([TopicPartition(t, p, epoch_ms) for t, p in wanted],
                                                         timeout=timeout), timeout)
    ends = watermarks(consumer, wanted, timeout)
    return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else ends[(tp.topic, tp.partition)][1]
            for tp in found}


def committed(consumer: Consumer, positions: Iterable[Position], timeout: float = 30.0) -> dict[Position, int | None]:
    """The committed offset (next to read) of `consumer`'s group per partition; None where nothing is committed.
    Reads the group's offsets without joining it."""
    asked = consumer.committed([TopicPartition(*pos) for pos in positions], timeout=timeout)
    return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in asked}


def groups_committed(admin: AdminClient, groups: Iterable[str], timeout: float = 30.0
                     ) -> dict[tuple[str, str, int], int]:
    """(group, topic, partition) -> committed offset, for every partition each of `groups` committed."""
    asked = [admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
             for group in groups]  # one group per request: the client takes no more
    return {(group, tp.topic, tp.partition): tp.offset
            for futures in asked for group, future in futures.items()
            for tp in future.result().topic_partitions or [] if tp.offset >= 0}


def read_to_end(consumer: Consumer, topics: Iterable[str], timeout: float = 30.0) -> Iterator[RawRecord]:
    """Every record of `topics`, from each partition's start to its end as of this call, by manual assignment
    (no group). A partition is done at its end even where compaction left offsets without records."""
    partitions = partitions_of(consumer, topics)
    ends = {pos: high for pos, (_, high) in watermarks(consumer, partitions, timeout).items()}
    consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])
    read = {pos: 0 for pos in partitions}
    try:
        while any(read[pos] < ends[pos] for pos in partitions):
            for msg in consumer.consume(500, 1.0):
                pos = (msg.topic() or "", msg.partition() or 0)
                if msg.error() is not None:
                    if is_end(msg):
                        read[pos] = max(read[pos], msg.offset() or 0)
                    continue
                read[pos] = (msg.offset() or 0) + 1
                if read[pos] <= ends[pos]:
                    yield raw_of(msg)
    finally:
        consumer.unassign()

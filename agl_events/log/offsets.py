"""Where partitions start and end, and which offset a point in time falls at: the broker's answers a replay
needs to decide how far to read. Retries the transient errors a just-created topic answers with."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from agl_events.log.records import Position

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

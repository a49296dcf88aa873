"""A consumer in a consumer group, for readers whose progress the group keeps (the store's ingester, a trainer's
sample stream, a runner's stop watcher): records come out as `RawRecord`s, partitions as numbers and positions,
so nothing outside `agl_events.log` handles confluent-kafka's types.

Views keep their own positions and read with `log.reader.EventReader` instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from enum import Enum

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from agl_events.log.clients import Consumer, make_consumer
from agl_events.log.records import Position, RawRecord

log = logging.getLogger(__name__)

#: Seconds `GroupConsumer.assign` asks for a group's committed offsets in all; how long one ask may take (librdkafka
#: waits out an ask whose coordinator lookup was refused, and reports the refusal as an event between asks); the
#: first pause between two asks, doubled up to the cap; how often, at most, a fetch still unanswered is logged.
COMMITTED_SECONDS, COMMITTED_ASK_SECONDS = 60.0, 2.0
COMMITTED_RETRY_SECONDS, COMMITTED_RETRY_CAP_SECONDS, COMMITTED_LOG_SECONDS = 0.2, 2.0, 10.0
#: Answers to a committed-offsets fetch that asking again cannot change: the principal is refused (authorization,
#: authentication) or the request itself is wrong. Anything else (NOT_COORDINATOR while a broker loads
#: `__consumer_offsets`, timeouts, a coordinator moving) is asked again: a transient error raised at once would
#: fail a store's start, while a permanent one asked again only costs the timeout.
PERMANENT_ERRORS = frozenset({
    KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION,
    KafkaError.INVALID_GROUP_ID, KafkaError._INVALID_ARG, KafkaError.UNSUPPORTED_VERSION,
    KafkaError._UNSUPPORTED_FEATURE})
#: Called with the partitions a rebalance moved (on this consumer's poll thread).
Rebalanced = Callable[[list[Position]], None]


class Start(Enum):
    """Where an assigned partition is read from."""

    STORED = OFFSET_STORED  # the group's committed offset (the reset policy's where none is)
    BEGINNING = OFFSET_BEGINNING
    END = OFFSET_END  # only what is appended from now on


def raw_of(msg: Message) -> RawRecord:
    """A consumed message as the record every reader outside the log handles."""
    return RawRecord(msg.topic() or "", msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value(),
                     dict(msg.headers() or []), max(msg.timestamp()[1], 0))


def is_end(msg: Message) -> bool:
    """Whether `msg` only says its partition has no more records now (`enable.partition.eof`)."""
    error = msg.error()
    return error is not None and error.code() == KafkaError._PARTITION_EOF


def is_permanent(error: KafkaError) -> bool:
    """Whether asking again cannot get past `error` (`PERMANENT_ERRORS`, or one librdkafka calls fatal)."""
    return error.fatal() or error.code() in PERMANENT_ERRORS


def records_of(messages: Iterable[Message], what: str) -> list[RawRecord]:
    """The records among consumed `messages`: partition ends are skipped, errors logged (as `what`'s) and skipped."""
    out = []
    for msg in messages:
        if msg.error() is None:
            out.append(raw_of(msg))
        elif not is_end(msg):
            log.warning("%s consumer error: %s", what, msg.error())
    return out


class GroupConsumer:
    """One consumer of `group_id` (commits only when told: `log.clients.consumer_config`). Not thread-safe: one
    thread calls it at a time."""

    def __init__(self, bootstrap: str, group_id: str, what: str, **overrides: object) -> None:
        """`what` names the reader in logged errors ("task-requests", "samples")."""
        self._consumer: Consumer = make_consumer(bootstrap, group_id, **overrides)
        self._what = what
        self._group_id = group_id

    def partitions(self, topic: str, timeout: float = 10.0) -> list[int]:
        """The partitions of `topic`; RuntimeError saying how to create it when it does not exist."""
        info = self._consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if info is None or info.error is not None:
            raise RuntimeError(f"topic {topic} does not exist; run `agl-events topics create`")
        return sorted(info.partitions)

    def assign(self, topic: str, start: Start, timeout: float = COMMITTED_SECONDS) -> None:
        """Read every partition of `topic` from `start`, outside the group's rebalancing (no waiting for a dead
        member's session to end).

        From `Start.STORED`, the group's committed offsets are fetched here first, asked again until the group's
        coordinator answers for every partition (KafkaException after `timeout` s, or at once for an error asking
        again cannot change, `is_permanent`: a principal without the group's ACLs). Left to librdkafka (an
        OFFSET_STORED assignment), a fetch answered NOT_COORDINATOR, as a fresh broker answers while it loads
        `__consumer_offsets`, is retried twice and its partitions are then never read until assigned again."""
        partitions = [TopicPartition(topic, p, start.value) for p in self.partitions(topic)]
        self._consumer.assign(self._committed(partitions, timeout) if start is Start.STORED else partitions)

    def _committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        """`partitions` at the group's committed offsets (OFFSET_INVALID where none is, so the reset policy applies)."""
        deadline = time.monotonic() + timeout
        pause, logged = COMMITTED_RETRY_SECONDS, None
        while True:
            try:
                found = self._consumer.committed(
                    partitions, timeout=max(0.1, min(COMMITTED_ASK_SECONDS, deadline - time.monotonic())))
                failed = [tp.error for tp in found if tp.error is not None]
                if not failed:
                    return list(found)
                error = failed[0]
            except KafkaException as exc:
                error = self._reported_error() or exc.args[0]
            if is_permanent(error):
                raise KafkaException(KafkaError(error.code(), f"{self._what}: the committed offsets of consumer "
                                                f"group {self._group_id} cannot be read: {error.name()} "
                                                f"({error.str()}); not asked again", fatal=False))
            now = time.monotonic()
            if now >= deadline:
                raise KafkaException(error)
            if logged is None or now - logged >= COMMITTED_LOG_SECONDS:
                log.info("%s: committed offsets not fetched yet (%s); asking again for up to %.0f s more",
                         self._what, error, deadline - now)
                logged = now
            time.sleep(min(pause, deadline - now))
            pause = min(2 * pause, COMMITTED_RETRY_CAP_SECONDS)

    def _reported_error(self) -> KafkaError | None:
        """The error librdkafka reported while nothing is assigned (a refused coordinator lookup comes as an event,
        not as the answer to `committed`); with partitions assigned a poll would take their records: None."""
        if self._consumer.assignment():
            return None
        event = self._consumer.poll(0)
        return None if event is None else event.error()

    def subscribe(self, topic: str, on_assign: Rebalanced | None = None, on_revoke: Rebalanced | None = None
                  ) -> None:
        """Join the group for `topic`; the callbacks hear of partitions moved to and from this member."""
        callbacks = {}
        if on_assign is not None:
            callbacks["on_assign"] = _positions_to(on_assign)
        if on_revoke is not None:
            callbacks["on_revoke"] = _positions_to(on_revoke)
        self._consumer.subscribe([topic], **callbacks)

    def consume(self, max_records: int, timeout: float) -> list[RawRecord]:
        """Up to `max_records` records within `timeout` (it waits the whole timeout unless that many come)."""
        return records_of(self._consumer.consume(max_records, timeout), self._what)

    def commit(self, next_offsets: Mapping[Position, int], wait: bool = True) -> None:
        """Store the next offset to read per partition as the group's progress; `wait`: until the group has it."""
        if next_offsets:
            self._consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in next_offsets.items()],
                                  asynchronous=not wait)

    def group_metadata(self) -> object:
        """This member's group metadata, opaque: what a transaction commits the group's offsets with
        (`log.transactions`)."""
        return self._consumer.consumer_group_metadata()

    def seek(self, position: Position, offset: int) -> None:
        """Read `position` again from `offset` (an assigned partition)."""
        self._consumer.seek(TopicPartition(*position, offset))

    def close(self) -> None:
        """Leave the group (a subscribed member's partitions move at once) and release the connection."""
        self._consumer.close()


def _positions_to(callback: Rebalanced) -> Callable[[Consumer, list[TopicPartition]], None]:
    def call(_: Consumer, partitions: list[TopicPartition]) -> None:
        callback([(tp.topic, tp.partition) for tp in partitions])

    return call

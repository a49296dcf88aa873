"""The one place that configures confluent-kafka clients, so durability settings cannot drift.

Every client also gets this process's connection settings (`log.kafka_config`: SASL, SSL, ...). They go
underneath ours: a setting agl-events relies on (acks, idempotence, isolation, group ids) keeps its value
whatever the file says, and a call site's overrides win over both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient

from agl_events.log.kafka_config import connection_config
from agl_events.topics import MESSAGE_MAX_BYTES

#: What the clients raise when the cluster refuses a request or does not answer in time: callers outside this
#: package catch it by this name.
LogError = KafkaException


#: A producer's delivery callback: (None, the record as logged) once acknowledged, (the error, ...) once given up.
DeliveryReport = Callable[[KafkaError | None, Message | None], None]


def error_text(error: LogError) -> str:
    """librdkafka's own words for `error` (its str() is a repr of the error object)."""
    return error.args[0].str() if error.args else str(error)


#: The producer's local queue, in KB (librdkafka's default is 1 GB). Unacknowledged records wait here; a
#: full queue makes `produce` raise BufferError and our writer's caller wait for room (`log.writer`), so a
#: process writing faster than the broker takes is slowed instead of growing. 64 MB holds eight of the
#: largest records and costs the span path nothing measurable (docs/reliability.md, back-pressure).
PRODUCER_QUEUE_KB = 64 * 1024


def producer_config(bootstrap: str, client_id: str, **overrides: Any) -> dict[str, Any]:
    """A durable producer: acks=all and idempotence, so an acknowledged write survives and is never doubled.

    Batching (linger, batch size) and compression are on because spans come in bursts and are
    compressible JSON-like text; they trade a few milliseconds for several times the throughput. The local
    queue is bounded (`PRODUCER_QUEUE_KB`).
    """
    return {
        **connection_config(),
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": "all",
        "enable.idempotence": True,
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 2,
        "batch.size": 1_000_000,
        "compression.type": "lz4",
        "message.max.bytes": MESSAGE_MAX_BYTES,
        "queue.buffering.max.kbytes": PRODUCER_QUEUE_KB,
        "log_level": 4,  # warnings and worse: librdkafka's informational lines only clutter CLI output
        **overrides,
    }


def consumer_config(bootstrap: str, group_id: str | None, **overrides: Any) -> dict[str, Any]:
    """A consumer that reads only committed data and never commits behind the caller's back."""
    return {
        **connection_config(),
        "bootstrap.servers": bootstrap,
        "group.id": group_id or "agl-events-reader",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "log_level": 4,
        **overrides,
    }


def admin_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    return {**connection_config(), "bootstrap.servers": bootstrap, "log_level": 4, **overrides}


def share_consumer_config(bootstrap: str, group_id: str, **overrides: Any) -> dict[str, Any]:
    """A share-group (KIP-932) member: no offsets of its own, so only the connection and the group."""
    return {**connection_config(), "bootstrap.servers": bootstrap, "group.id": group_id, **overrides}


def make_producer(bootstrap: str, client_id: str, **overrides: Any) -> Producer:
    return Producer(producer_config(bootstrap, client_id, **overrides))


def make_consumer(bootstrap: str, group_id: str | None = None, **overrides: Any) -> Consumer:
    return Consumer(consumer_config(bootstrap, group_id, **overrides))


def make_share_consumer(bootstrap: str, group_id: str, **overrides: Any) -> ShareConsumer:
    return ShareConsumer(share_consumer_config(bootstrap, group_id, **overrides))


def make_admin(bootstrap: str, **overrides: Any) -> AdminClient:
    return AdminClient(admin_config(bootstrap, **overrides))

"""The log on the real broker: events survive produce/consume intact, in order, and bad records divert."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer

from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.dead_letters import dead_letter_to
from agl_events.log.reader import EventReader
from agl_events.log.records import EncodedEvent, NewEvent, event
from agl_events.log.writer import EventWriter
from agl_events.store.kafka import KafkaLog
from agl_events.topics import LAYOUT, MESSAGE_MAX_BYTES, Topic, topic_name
from tests.events.sample import sample
from tests.eventually import eventually


def _read_all(reader: EventReader, expected: int, deadline: float = 30.0) -> list:
    got: list = []

    def read() -> list:
        got.extend(reader.poll(1000, 0.2))
        return got

    return eventually(read, f"{expected} events in the log", within=deadline, until=lambda it: len(it) >= expected)


@pytest.mark.kafka
def test_topics_are_created_idempotently_with_their_settings(bootstrap: str, experiment: str) -> None:
    admin = make_admin(bootstrap)
    first = create_topics(admin, experiment)
    assert set(first.values()) == {"created"} and len(first) == len(LAYOUT)
    assert set(create_topics(admin, experiment).values()) == {"exists"}
    meta = admin.list_topics(timeout=10).topics
    for spec in LAYOUT:
        assert len(meta[spec.name(experiment)].partitions) == spec.partitions
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name(experiment, Topic.RESOURCES))
    configs = admin.describe_configs([resource])[resource].result()
    assert configs["cleanup.policy"].value == "compact"
    assert configs["max.message.bytes"].value == str(MESSAGE_MAX_BYTES)  # every topic, not only spans


@pytest.mark.kafka
def test_every_event_kind_survives_the_broker_in_order(bootstrap: str, experiment: str) -> None:
    create_topics(make_admin(bootstrap), experiment)
    codec = AvroCodec()
    writer = EventWriter(bootstrap, experiment, codec, producer_id="test-writer")
    sent = []
    for schema in codec.schemas:
        fields = {f["name"]: sample(f["type"]) for f in schema.schema["fields"][3:]}
        for i in range(3):
            sent.append(event(schema.name, "ro-same-key", 1000.0 + i, "test-writer", **fields))
    logged = writer.append_sync(sent)
    assert [e.record for e in logged] == [e.record for e in sent]
    writer.close()
    reader = EventReader(bootstrap, experiment, codec, [t for t in Topic if t != Topic.DLQ])
    reader.assign()
    got = _read_all(reader, len(sent))
    reader.close()
    by_topic: dict[str, list] = {}
    for e in got:
        by_topic.setdefault(e.topic, []).append(e)
    for new in sent:  # same key -> same partition -> the log keeps the order of each topic
        assert by_topic[topic_name(experiment, new.topic)].pop(0).record == new.record


@pytest.mark.kafka
def test_undecodable_records_go_to_the_dead_letter_topic(bootstrap: str, experiment: str) -> None:
    create_topics(make_admin(bootstrap), experiment)
    codec = AvroCodec()
    topic = topic_name(experiment, Topic.WORKERS)
    raw = Producer({"bootstrap.servers": bootstrap})
    raw.produce(topic, value=b"\xc3\x01garbage!", key=b"w1")
    raw.flush(10)
    writer = EventWriter(bootstrap, experiment, codec, producer_id="test-writer")
    writer.append_sync([event("WorkerHeartbeat", "w1", 1.0, "p", worker_id="w1", stats_given=False,
                              heartbeat_stats_json=None)])
    reader = EventReader(bootstrap, experiment, codec, [Topic.WORKERS], dead_letter=dead_letter_to(writer))
    reader.assign()
    got = _read_all(reader, 1)
    writer.flush()
    assert [e.kind for e in got] == ["WorkerHeartbeat"] and reader.dead_lettered == 1
    dlq = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dlq-{experiment}",
                    "auto.offset.reset": "earliest"})
    dlq.subscribe([topic_name(experiment, Topic.DLQ)])
    msg = None
    for _ in range(100):
        msg = dlq.poll(0.3)
        if msg is not None and msg.error() is None:
            break
    dlq.close()
    reader.close()
    writer.close()
    assert msg is not None and msg.value() == b"\xc3\x01garbage!"
    headers = dict(msg.headers())
    assert headers["agl.source.topic"] == topic.encode()
    assert headers["agl.error.type"] == b"UnknownSchemaError"


@pytest.mark.kafka
def test_reading_a_missing_topic_says_how_to_create_it(bootstrap: str, experiment: str) -> None:
    reader = EventReader(bootstrap, experiment, AvroCodec(), [Topic.ROLLOUTS])
    with pytest.raises(RuntimeError, match="topics create"):
        reader.assign()
    reader.close()


def _heartbeat(worker_id: str, stats_json: str) -> NewEvent:
    return event("WorkerHeartbeat", worker_id, 1.0, "p", worker_id=worker_id, stats_given=True,
                 heartbeat_stats_json=stats_json)


def _encoded(writer: EventWriter, events: list[NewEvent]) -> list[EncodedEvent]:
    return [EncodedEvent(new, writer.encode(new)) for new in events]


@pytest.fixture
async def unhandled_async_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """What asyncio reports to nobody, e.g. "Future exception was never retrieved" (checked after a gc)."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    yield reported
    loop.set_exception_handler(None)


def _refusing_writer(**overrides: Any) -> EventWriter:
    """A real producer with no broker to reach: what it queues times out; a record over 1000 bytes it
    refuses at once in produce() (librdkafka's MSG_SIZE_TOO_LARGE), as it would an event over its limit."""
    return EventWriter("127.0.0.1:9", "refused", AvroCodec(), producer_id="test-writer",
                       **{"message.timeout.ms": 200, "message.max.bytes": 1000, **overrides})


async def _all_delivered_and_collected(*writers: EventWriter) -> None:
    for writer in writers:
        await asyncio.to_thread(writer.close)  # flushes: every queued event is delivered (here: timed out)
    await asyncio.sleep(0.05)  # the delivery results reach the loop
    gc.collect()


async def test_an_append_refused_midway_raises_and_leaves_no_unretrieved_errors(unhandled_async_errors) -> None:
    writer = _refusing_writer()
    events = _encoded(writer, [_heartbeat("w1", "{}"), _heartbeat("w2", "{}"),
                               _heartbeat("w3", json.dumps("x" * 2000))])
    with pytest.raises(KafkaException, match="too large"):
        writer.append(events)  # the first two are queued and fail later, with nobody waiting for them
    await _all_delivered_and_collected(writer)
    assert unhandled_async_errors == []


async def test_kafka_log_whose_tasks_writer_refuses_raises_and_leaves_no_unretrieved_errors(
        unhandled_async_errors) -> None:
    log = KafkaLog(_refusing_writer(), _refusing_writer())
    dispatched = event("TaskDispatched", "ro-1", 1.0, "p", rollout_id="ro-1", attempt_id=None,
                       attempt_sequence_id=None, worker_id=None, resources_id=None, mode=None,
                       input_json=json.dumps("x" * 2000), queue_seq=1)
    with pytest.raises(KafkaException, match="too large"):
        log.append(_encoded(log.writer, [_heartbeat("w1", "{}"), dispatched]))
    await _all_delivered_and_collected(log.writer, log.tasks_writer)
    assert unhandled_async_errors == []

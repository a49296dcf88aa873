"""The log on the real broker: events survive produce/consume intact, in order, and bad records divert."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer

from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.dead_letters import dead_letter_to
from agl_events.log.reader import EventReader
from agl_events.log.records import event
from agl_events.log.writer import EventWriter
from agl_events.topics import LAYOUT, Topic, topic_name
from tests.events.sample import sample


def _read_all(reader: EventReader, expected: int, deadline: float = 30.0) -> list:
    got: list = []
    end = time.monotonic() + deadline
    while len(got) < expected and time.monotonic() < end:
        got.extend(reader.poll(1000, 0.2))
    return got


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


def test_reading_a_missing_topic_says_how_to_create_it(bootstrap: str, experiment: str) -> None:
    reader = EventReader(bootstrap, experiment, AvroCodec(), [Topic.ROLLOUTS])
    with pytest.raises(RuntimeError, match="topics create"):
        reader.assign()
    reader.close()

"""Lines straight to the task-requests topic on the real broker: keyed records, acknowledgements counted."""

from __future__ import annotations

import json

import orjson
import pytest
from confluent_kafka import Consumer

from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin, make_producer
from agl_events.produce.to_kafka import produce_to_topic
from agl_events.topics import Topic, topic_name

pytestmark = pytest.mark.kafka


def _records(settings: Settings, topic: str, count: int) -> dict[bytes, bytes]:
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "t-read",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    found: dict[bytes, bytes] = {}
    try:
        for _ in range(200):
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is None:
                    found[msg.key() or b""] = msg.value() or b""
            if len(found) >= count:
                break
    finally:
        consumer.close()
    return found


def test_valid_lines_become_keyed_records_and_bad_ones_are_reported(settings: Settings) -> None:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    topic = topic_name(settings.experiment, Topic.TASK_REQUESTS)
    lines = [json.dumps({"id": f"k{i}", "input": {"i": i}, "mode": "train"}) for i in range(1200)]
    lines[7] = "{not json"
    lines[8] = json.dumps({"input": 1})  # no key field
    seen: list[tuple[int, int]] = []
    producer = make_producer(settings.bootstrap_servers, "t-produce")
    try:
        report = produce_to_topic(producer, topic, lines, key_field="id", on_progress=lambda *p: seen.append(p))
    finally:
        producer.close()
    assert (report.lines, report.accepted, report.failed) == (1200, 1198, [])
    assert [number for number, _ in report.rejected] == [8, 9]
    assert seen[-1] == (1200, 1198) and len(seen) > 2  # progress along the way, the final count last
    records = _records(settings, topic, 1198)
    assert len(records) == 1198
    assert orjson.loads(records[b"k42"]) == {"input": {"i": 42}, "mode": "train"}  # the key field taken out


def test_lines_kafka_never_takes_are_reported_with_their_numbers(settings: Settings) -> None:
    producer = make_producer("127.0.0.1:1", "t-dead", **{"message.timeout.ms": 1500, "log_level": 0})
    try:
        report = produce_to_topic(producer, "agl.nowhere.task-requests", ['{"input": 1}', "", '{"input": 2}'])
    finally:
        producer.close()
    assert report.accepted == 0 and not report.ok
    assert [number for number, _ in report.failed] == [1, 3]
    assert all("timed out" in why.lower() for _, why in report.failed), report.failed

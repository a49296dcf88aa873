"""A corrupt event on a topic the store follows goes to the DLQ; the store keeps serving."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from agl_events.config import Settings
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import Topic, topic_name
from tests.eventually import eventually_async

pytestmark = pytest.mark.kafka


async def test_corrupt_event_is_dead_lettered_and_the_store_keeps_going(settings: Settings, tmp_path: Path) -> None:
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        before = await store.enqueue_rollout(input="before")
        raw = Producer({"bootstrap.servers": settings.bootstrap_servers})
        raw.produce(topic_name(settings.experiment, Topic.ROLLOUTS), value=b"not avro at all", key=b"ro-x")
        raw.flush(10)
        assert await eventually_async(lambda: store.dead_lettered, "the corrupt event dead-lettered", within=10) == 1
        after = await store.enqueue_rollout(input="after")
        claimed = await store.dequeue_many_rollouts(limit=5)
        assert [c.rollout_id for c in claimed] == [before.rollout_id, after.rollout_id]
    finally:
        await store.close()
    dlq = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "dlq-check",
                    "auto.offset.reset": "earliest"})
    dlq.subscribe([topic_name(settings.experiment, Topic.DLQ)])
    values = []
    for _ in range(60):
        msg = dlq.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
            break
    dlq.close()
    assert values == [b"not avro at all"]
    # A rebuilt view skips the bad record the same way and holds both rollouts.
    rebuilt = await KafkaLightningStore.open(settings, view_dir=tmp_path / "rebuilt")
    try:
        assert (await rebuilt.statistics())["total_rollouts"] == 2
    finally:
        await rebuilt.close()

"""A starting store announces its queue again, so no queued rollout is lost to a crash between the two
producers (RolloutEnqueued durable, TaskDispatched not); a rollout announced twice is still claimed once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import Topic, topic_name
from agl_events.types import EnqueueRolloutRequest

pytestmark = pytest.mark.kafka


def _dispatched(settings: Settings, expected: int) -> Counter[str]:
    """TaskDispatched records on the tasks topic, by rollout id (read until `expected` or a bounded wait)."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "t-tasks",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name(settings.experiment, Topic.TASKS)])
    codec, found = AvroCodec(), Counter[str]()
    try:
        for _ in range(100):
            for msg in consumer.consume(100, 0.1):
                if msg.error() is None:
                    found[codec.decode(msg.value() or b"").record["rollout_id"]] += 1
            if sum(found.values()) >= expected:
                break
    finally:
        consumer.close()
    return found


async def test_a_reopened_store_announces_what_is_still_queued(settings: Settings, tmp_path: Path) -> None:
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        first, *waiting = [r.rollout_id for r in
                           await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(3)])]
        assert await store.claim_rollout(first, "w1") is not None  # running: not in the queue any more
    finally:
        await store.close()
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        assert _dispatched(settings, 5) == {first: 1, waiting[0]: 2, waiting[1]: 2}
        assert await store.claim_rollout(waiting[0], "w2") is not None
        assert await store.claim_rollout(waiting[0], "w3") is None  # its second announcement: refused
    finally:
        await store.close()

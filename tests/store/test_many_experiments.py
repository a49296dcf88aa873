"""A store serving one experiment among many: its background work holds none of the event loop's shared
threads, and its store group gives it its partitions in one heartbeat, on any broker."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
from confluent_kafka import ConsumerGroupType, Producer

from agl_events.config import Settings
from agl_events.log.clients import make_admin
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.membership import group_id
from agl_events.topics import Topic, topic_name
from tests.eventually import eventually_async

pytestmark = pytest.mark.kafka

#: The loop's shared executor in these tests: every one of its threads is then held by the test.
SHARED_THREADS = 2


def _produce_task(settings: Settings, key: str) -> None:
    """A task request as any Kafka client writes it."""
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    producer.produce(topic_name(settings.experiment, Topic.TASK_REQUESTS), key=key.encode(),
                     value=orjson.dumps({"input": {"task": key}}))
    assert producer.flush(30) == 0


async def test_a_store_keeps_folding_and_ingesting_while_the_loops_shared_threads_are_all_busy(
        settings: Settings, tmp_path: Path) -> None:
    """Before, each store's follower and ingester polled on `asyncio.to_thread`, holding threads of the loop's
    default executor (min(32, cores + 4)) for good: on a server with a few experiments every other blocking
    call queued behind their polls, and first calls on new experiments took seconds. Here every shared thread
    is held by someone else (as other experiments' polls held them), and the store still reads the log."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(SHARED_THREADS, thread_name_prefix="shared"))
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", advertise_url="http://127.0.0.1:9")
    release = threading.Event()
    held: list[asyncio.Future[bool]] = []
    try:
        first = await store.enqueue_rollout(input="the first call")  # decided here: the group gave us everything
        assert store.group.router.placement.owns(first.rollout_id)
        held += [loop.run_in_executor(None, release.wait) for _ in range(SHARED_THREADS)]
        _produce_task(settings, "k1")
        found = await eventually_async(lambda: store.task_rollouts(["k1"]), "the task request ingested")
        rid = found["k1"]
        assert (await store.get_rollout_by_id(rid)) is not None
    finally:
        release.set()
        await asyncio.gather(*held)
        await store.close()


async def test_a_store_alone_in_its_group_owns_every_partition_after_one_heartbeat(
        settings: Settings, tmp_path: Path) -> None:
    """The store group is a KIP-848 consumer-protocol group: the coordinator assigns in its answer to a
    heartbeat, with no `group.initial.rebalance.delay.ms` (3 s by default) to wait out first, so a store
    alone decides its first call at once on any Kafka 4 cluster (figures: python -m agl_events.bench.experiments).
    It still hands partitions over drained: tests/store/test_store_group.py."""
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", advertise_url="http://127.0.0.1:9")
    try:
        await store.enqueue_rollout(input="the first call")
        assert (await store.statistics())["store_group"]["owned"] == [0, 1, 2]
        name = group_id(settings.experiment)
        admin = make_admin(settings.bootstrap_servers)
        group = await asyncio.to_thread(lambda: admin.describe_consumer_groups([name])[name].result(30))
        assert group.type == ConsumerGroupType.CONSUMER
        assert [m.client_id for m in group.members] == ["http://127.0.0.1:9"]
    finally:
        await store.close()

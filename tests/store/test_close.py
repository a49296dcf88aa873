"""A Kafka store closes once, whoever asks and however often, even when the first caller stops waiting."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition

from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin, make_consumer
from agl_events.store.ingester import ingest_group
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.membership import StoreGroup, group_id
from agl_events.store.routing import Router
from agl_events.topics import Topic, topic_name
from agl_events.views.rocks import RocksKV

pytestmark = pytest.mark.kafka

PARTITIONS = 3  # the rollouts and task-requests topics', from the layout


async def test_a_close_its_caller_gave_up_on_still_ends_and_a_second_close_waits_for_it(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server gives up on a store's close after `CLOSE_TIMEOUT_SECONDS` (cancelling its wait), and `serving`
    closes its store again. That second close used to raise (the ingester's lane, closed by the first, refused
    the consumer's close) and leave the view open and the store in its group."""
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", advertise_url="http://127.0.0.1:9")
    await store.enqueue_rollout(input="before closing")
    leaving = asyncio.Event()
    leave = StoreGroup.leave

    async def observed_leave(group: StoreGroup) -> None:
        leaving.set()
        await leave(group)

    monkeypatch.setattr(StoreGroup, "leave", observed_leave)
    first = asyncio.ensure_future(store.close())
    await leaving.wait()  # the ingester is stopped; the store group is being left
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.wait_for(store.close(), 30)

    RocksKV(tmp_path / "view").close()  # the view was released: RocksDB lets another writer open it
    name = group_id(settings.experiment)
    admin = make_admin(settings.bootstrap_servers)
    group = await asyncio.to_thread(lambda: admin.describe_consumer_groups([name])[name].result(30))
    assert group.members == []  # the store left its group


def _hogs(settings: Settings) -> list[Consumer]:
    """PARTITIONS members of the experiment's store group (stores at URLs nobody serves), each owning one
    partition: polled together, since a member hands a partition to the next only inside a poll."""
    hogs = [make_consumer(settings.bootstrap_servers, group_id(settings.experiment),
                          **{"client.id": f"http://127.0.0.1:{member}", "group.protocol": "consumer"})
            for member in range(1, PARTITIONS + 1)]
    for hog in hogs:
        hog.subscribe([topic_name(settings.experiment, Topic.ROLLOUTS)])
    deadline = time.monotonic() + 60
    while not all(len(hog.assignment()) == 1 for hog in hogs):
        assert time.monotonic() < deadline, [hog.assignment() for hog in hogs]
        for hog in hogs:
            hog.poll(0.1)
    return hogs


async def test_a_store_owning_nothing_closes_while_its_ingester_waits_for_a_partition(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store of a group with more members than partitions owns none and creates no rollout: its ingester waits
    for a partition with the task request in hand. Closing it (without the server's interrupt_waits first) used
    to wait for that ingester forever; now the request is left, uncommitted, to the group's next reader."""
    await asyncio.to_thread(create_topics, make_admin(settings.bootstrap_servers), settings.experiment)
    hogs = await asyncio.to_thread(_hogs, settings)
    ingesting = asyncio.Event()
    owning = Router.owning

    async def observed_owning(router: Router) -> None:
        ingesting.set()
        await owning(router)

    monkeypatch.setattr(Router, "owning", observed_owning)
    try:
        store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view",
                                               advertise_url="http://127.0.0.1:9")
        producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
        producer.produce(topic_name(settings.experiment, Topic.TASK_REQUESTS), key=b"k1",
                         value=orjson.dumps({"input": {"task": "k1"}}))
        assert producer.flush(30) == 0
        await asyncio.wait_for(ingesting.wait(), 30)  # the ingester has the request and waits to own a partition
        await asyncio.wait_for(store.close(), 20)
        assert store.ingester.enqueued == 0
        requests = topic_name(settings.experiment, Topic.TASK_REQUESTS)
        reader = make_consumer(settings.bootstrap_servers, ingest_group(settings.experiment))
        partitions = [TopicPartition(requests, p) for p in range(PARTITIONS)]
        committed = await asyncio.to_thread(reader.committed, partitions, 30)
        reader.close()
        assert [tp.offset for tp in committed] == [OFFSET_INVALID] * PARTITIONS  # the request is still there to ingest
    finally:
        for hog in hogs:
            hog.close()

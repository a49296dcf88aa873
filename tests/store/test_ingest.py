"""Task requests any Kafka client writes become rollouts exactly once per key, across duplicates and restarts."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.events.task_record import encode_avro
from agl_events.events.task_request import TaskRequest
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.reducers.rollouts import TASK_KEY
from agl_events.store.errors import NoOwnerError
from agl_events.store.ingester import Ingester, ingest_group
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import Topic, topic_name
from agl_events.types import EnqueueRolloutRequest
from tests.eventually import eventually_async

pytestmark = pytest.mark.kafka

N = 1000


def _produce(settings: Settings, records: list[tuple[bytes, bytes]]) -> None:
    """As any client would: a plain confluent-kafka producer, no agl-events code on the write path."""
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "enable.idempotence": True})
    topic = topic_name(settings.experiment, Topic.TASK_REQUESTS)
    for key, value in records:
        producer.produce(topic, value=value, key=key)
        producer.poll(0)
    assert producer.flush(30) == 0


def _json_records(count: int, prefix: str = "t") -> list[tuple[bytes, bytes]]:
    return [(f"{prefix}{i}".encode(), orjson.dumps({"input": {"i": i}, "mode": "train"})) for i in range(count)]


async def _ingested(store: KafkaLightningStore, count: int) -> None:
    """Wait until the store has handled `count` records since it opened (at most 2 minutes; no timing asserted)."""
    ingester = store.ingester
    await eventually_async(lambda: (ingester.enqueued, ingester.duplicates, ingester.dead_lettered),
                           f"{count} records handled (enqueued, duplicates, dead-lettered)", within=120,
                           until=lambda handled: sum(handled) >= count)


async def _total(store: KafkaLightningStore) -> int:
    return int((await store.statistics())["total_rollouts"])


async def test_json_and_avro_requests_become_one_rollout_per_key_even_when_produced_twice(
        settings: Settings, tmp_path: Path) -> None:
    """10k tasks (5k JSON, 5k Avro) from a plain producer, then all of them again."""
    half = 5000
    codec = AvroCodec()
    avro = [(f"a{i}".encode(), encode_avro(codec, EnqueueRolloutRequest(input=f"avro {i}", metadata={"n": i})))
            for i in range(half)]
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        _produce(settings, _json_records(half) + avro)
        _produce(settings, _json_records(half) + avro)  # a producer retrying everything
        await _ingested(store, 2 * (2 * half))
        assert store.ingester.enqueued == 2 * half
        assert store.ingester.duplicates == 2 * half
        assert await _total(store) == 2 * half
        rid = (await store.task_rollouts(["a7"])).get("a7")
        assert rid is not None
        rollout = await store.get_rollout_by_id(rid)
        assert rollout is not None and rollout.input == "avro 7" and rollout.metadata == {"n": 7, TASK_KEY: "a7"}
        queued = await store.query_rollouts(status_in=["queuing"])
        assert len(queued) == 2 * half
    finally:
        await store.close()


async def test_a_store_that_rereads_every_request_after_a_crash_enqueues_none_again(
        settings: Settings, tmp_path: Path) -> None:
    """The worst crash: rollouts durable, no offset committed, view lost. Replay rebuilds the key index first."""
    _produce(settings, _json_records(N))
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        await _ingested(store, N)
    finally:
        await store.close()
    rewind = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": ingest_group(settings.experiment)})
    topic = topic_name(settings.experiment, Topic.TASK_REQUESTS)
    rewind.commit(offsets=[TopicPartition(topic, p, 0) for p in range(3)], asynchronous=False)
    rewind.close()
    _produce(settings, _json_records(N // 10, prefix="new"))
    reopened = await KafkaLightningStore.open(settings, view_dir=tmp_path / "fresh-view")
    try:
        await _ingested(reopened, N + N // 10)
        assert (reopened.ingester.enqueued, reopened.ingester.duplicates) == (N // 10, N)
        assert await _total(reopened) == N + N // 10
    finally:
        await reopened.close()


async def test_a_store_closed_mid_ingest_and_reopened_ends_with_one_rollout_per_key(
        settings: Settings, tmp_path: Path) -> None:
    _produce(settings, _json_records(N))
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        await eventually_async(lambda: store.ingester.enqueued, "the first task request enqueued")
    finally:
        await store.close()
    reopened = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        assert await eventually_async(lambda: _total(reopened), f"{N} rollouts after the reopen",
                                      until=lambda total: total >= N) == N
    finally:
        await reopened.close()


async def test_invalid_requests_are_dead_lettered_with_reason_and_offset_and_the_rest_enqueued(
        settings: Settings, tmp_path: Path) -> None:
    bad = [(b"b1", b"not json"), (b"b2", b'{"input": 1, "mood": "train"}'), (b"b3", b'{"mode": "train"}'),
           (b"b4", b'{"input": 1, "resources_id": "rs-nope"}'), (b"b5", b"\xc3\x01garbage")]
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view")
    try:
        _produce(settings, _json_records(10) + bad)
        await _ingested(store, 15)
        assert (store.ingester.enqueued, store.ingester.dead_lettered) == (10, 5)
        assert await _total(store) == 10
    finally:
        await store.close()
    dlq = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "dlq-check",
                    "auto.offset.reset": "earliest"})
    dlq.subscribe([topic_name(settings.experiment, Topic.DLQ)])
    found: dict[bytes, dict[str, bytes]] = {}
    for _ in range(60):
        msg = dlq.poll(0.5)
        if msg is not None and msg.error() is None:
            found[msg.key()] = dict(msg.headers() or [])
        if len(found) == len(bad):
            break
    dlq.close()
    assert set(found) == {key for key, _ in bad}
    reasons = {key: headers["agl.error.message"].decode() for key, headers in found.items()}
    assert "not JSON" in reasons[b"b1"]
    assert "mood" in reasons[b"b2"] and "input" in reasons[b"b3"]
    assert "unknown resources id 'rs-nope'" in reasons[b"b4"]
    assert "TaskRequested" in reasons[b"b5"]
    assert all(headers["agl.source.topic"].endswith(b".task-requests") and headers["agl.source.offset"].isdigit()
               for headers in found.values())


async def test_an_ingester_goes_on_when_the_group_did_not_say_in_time_which_keys_it_ingested(
        settings: Settings) -> None:
    """In a store group the ingester asks the members which keys of a poll became rollouts; when not every
    partition has an owner within the router's 60 s (a member's take-over still folding a long history, a dead
    member's session not over) that is NoOwnerError, which the ingester took for the store closing: it stopped
    for good, and the store ingested nothing more while it served. It reads the batch again instead."""
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    _produce(settings, _json_records(1))
    answers: list[str] = []
    ingested: list[str] = []

    async def known(keys: list[str]) -> dict[str, str]:
        answers.append("no owner" if not answers else "none known")
        if answers[-1] == "no owner":
            raise NoOwnerError("no store of the group owns every partition (waited 60 s)")
        return {}

    async def ingest(key: str, request: TaskRequest) -> tuple[str, bool]:
        ingested.append(key)
        return f"ro-{key}", True

    ingester = Ingester(settings.bootstrap_servers, settings.experiment,
                        topic_name(settings.experiment, Topic.TASK_REQUESTS), AvroCodec(), ingest,
                        dead_letter=lambda record, exc: None, flush_dead_letters=lambda: None, known=known)
    ingester.start()
    try:
        assert await eventually_async(lambda: list(ingested), "the request ingested once the group answered",
                                      within=60) == ["t0"]
    finally:
        await ingester.stop()
    assert answers == ["no owner", "none known"]

"""Share-group members on the real broker: what leaving does to settled records, and how often the runners' group
hands a record out (each hand-out counts towards the delivery limit, past which the broker archives the record)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from agl_events.events.codec import AvroCodec
from agl_events.log.clients import make_admin
from agl_events.log.share import Acquired, Outcome, ShareMember, configure_share_group
from agl_events.runner.tasks import TASK_LOCK_MS, TaskQueue, share_group
from tests.eventually import eventually

pytestmark = pytest.mark.kafka


def _topic_with(bootstrap: str, values: list[bytes]) -> str:
    topic = f"t-share-{uuid.uuid4().hex[:8]}"
    admin = make_admin(bootstrap)  # held: a collected client cancels its pending request
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value)
    producer.flush()
    return topic


def _member(bootstrap: str, group: str, topic: str) -> ShareMember:
    member = ShareMember(bootstrap, group)
    member.subscribe(topic)
    return member


def _next(member: ShareMember) -> Acquired:
    return eventually(lambda: member.poll(0.2), "a record handed out")[0]


def test_a_record_accepted_before_leaving_is_not_handed_out_again(bootstrap: str) -> None:
    topic, group = _topic_with(bootstrap, [b"first", b"second"]), f"t-share-{uuid.uuid4().hex[:8]}"
    configure_share_group(bootstrap, group, TASK_LOCK_MS, 10)
    leaving = _member(bootstrap, group, topic)
    first = _next(leaving)
    assert first.record.value == b"first"
    leaving.settle(first, Outcome.ACCEPT)  # sent with the next poll, which a runner stepping aside never makes
    leaving.unsubscribe()  # steps aside while its rollouts run; an idle member takes the queue meanwhile
    other = _member(bootstrap, group, topic)
    try:
        assert _next(other).record.value == b"second"  # in offset order: "first", had it come back, came first
    finally:
        other.close()
        leaving.close()


def test_the_runners_group_hands_a_task_out_more_often_than_kafkas_default_limit(bootstrap: str,
                                                                                 experiment: str) -> None:
    TaskQueue(bootstrap, experiment, AvroCodec(), "r1").close()  # configures the runners' group
    member = _member(bootstrap, share_group(experiment), _topic_with(bootstrap, [b"task"]))
    try:
        for _ in range(6):  # Kafka's default limit is 5: the sixth hand-out would never come
            member.settle(_next(member), Outcome.RELEASE)
    finally:
        member.close()

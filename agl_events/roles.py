"""The Kafka ACLs each of our processes needs on a secured cluster, as data (docs/security.md explains them).

A principal per kind of process keeps what a leaked password opens small: a runner's may read tasks and stop
requests and write spans, nothing else (it reaches the rest through the store's HTTP API). The names come from
the modules that choose them (topics, consumer groups, the runners' share group), so a renamed group cannot
leave its ACL behind. `broker.secure.SecureBroker.grant` writes them on the secured test broker; operators
create the same with `kafka-acls` or their platform's tooling (Strimzi's `KafkaUser`).
"""

from __future__ import annotations

import functools
from typing import Literal

from agl_events.log.acls import Grant
from agl_events.runner.tasks import share_group
from agl_events.samples.stream import default_group
from agl_events.store.ingester import ingest_group
from agl_events.store.membership import group_id as owners_group
from agl_events.topics import Topic, topic_name

Role = Literal["store", "runner", "worker", "proxy", "produce", "replay", "trainer"]
ROLES: tuple[Role, ...] = ("store", "runner", "worker", "proxy", "produce", "replay", "trainer")

_topic = functools.partial(Grant, "topic")
_group = functools.partial(Grant, "group")
#: The group id of readers that join no group (`log.clients.consumer_config`): librdkafka still looks up its
#: coordinator (DESCRIBE), and a refusal is logged as a consumer error.
_READERS = _group("agl-events-reader", ("describe",), False)


def role_grants(role: Role, experiment: str) -> list[Grant]:
    """The ACLs a process of `role` needs for `experiment` (topics `agl.<experiment>.*` and its groups).

    store: `agl-events store` (creates the experiment's topics, appends, folds, ingests task requests);
    runner: `agl-events runner`; worker: `agl-events processor` and `agl-events samples`; proxy: `agl-events proxy`
    (records calls as spans; the store hands out their sequence ids); produce: `agl-events
    produce tasks`; replay: `agl-events replay` (reads only); trainer: a `Trainer`, which hosts a store, starts
    runners and the samples worker, and reads samples (all of theirs).
    """
    if role == "trainer":
        return [*role_grants("store", experiment), *role_grants("runner", experiment),
                *role_grants("worker", experiment), _group(default_group(experiment), ("read", "describe"), False),
                # its steps are committed in transactions whose id is the sample stream's group (samples.step_log)
                Grant("transactional_id", default_group(experiment), ("write", "describe"), False)]
    return _GRANTS[role](experiment)


def _runner(experiment: str) -> list[Grant]:
    return [_topic(topic_name(experiment, Topic.TASKS), ("read", "describe"), False),
            _topic(topic_name(experiment, Topic.CONTROL), ("read", "describe"), False),
            _topic(topic_name(experiment, Topic.SPANS), ("write", "describe"), False),
            _group(share_group(experiment), ("read", "describe", "alter_configs"), False),
            _group("agl-stop-", ("read", "describe"))]


def _store(experiment: str) -> list[Grant]:
    return [_topic(f"agl.{experiment}.", ("create", "read", "write", "describe", "describe_configs")),
            _group(ingest_group(experiment), ("read", "describe"), False),
            _group(owners_group(experiment), ("read", "describe"), False), _READERS]


def _worker(experiment: str) -> list[Grant]:
    from agl_events.processors.samples import app_id as samples_app  # imports faust: only workers' grants pay
    from agl_events.processors.views import app_id as processor_app

    return [_topic(f"agl.{experiment}.", ("create", "read", "write", "describe", "describe_configs")),
            _group(processor_app(experiment), ("read", "describe")),
            _group(samples_app(experiment), ("read", "describe"))]


def _proxy(experiment: str) -> list[Grant]:
    return [_topic(topic_name(experiment, Topic.SPANS), ("write", "describe"), False)]


def _produce(experiment: str) -> list[Grant]:
    return [_topic(topic_name(experiment, Topic.TASK_REQUESTS), ("write", "describe"), False)]


def _replay(experiment: str) -> list[Grant]:
    return [_topic(f"agl.{experiment}.", ("read", "describe")), _READERS]


_GRANTS = {"store": _store, "runner": _runner, "worker": _worker, "proxy": _proxy, "produce": _produce,
           "replay": _replay}

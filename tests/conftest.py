"""Shared fixtures: the real broker that `make test` starts, unique experiments, and store backends."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # agentlightning's import is offline-safe

from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import create_topics, delete_topics
from agl_events.log.clients import make_admin
from tests.order import heaviest_first
from tests.tiers import check_markers, require_kafka_marker

pytest_plugins = ("pytester",)  # tests/structure/test_tiers.py runs the tier check in a pytest of its own


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that reaches the broker through a fixture must be marked `kafka` (see tests/tiers.py); the
    longest files run first (see tests/order.py)."""
    check_markers(items)
    heaviest_first(items)


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """Bootstrap servers of the test broker (AGL_KAFKA_BOOTSTRAP, or the local one, started if needed)."""
    return ensure_broker(Settings.from_env())


#: The contract fixtures and the experiment their Kafka stores open, as a suffix of the test's experiment.
CONTRACT_EXPERIMENTS = {"store": "", "store_factory": "-default"}


class TopicsAhead:
    """Creates the topics of the next contract test's experiment while the current test runs, and deletes a
    finished test's, in a thread of its own.

    A Kafka contract test runs in tens of milliseconds; creating its experiment's 10 topics (28 partitions) took
    about a second before it and deleting them a quarter after it, both spent waiting on the broker. The
    experiments are as fresh as before (new names, empty topics): only when their topics appear changes.
    """

    def __init__(self, bootstrap: str) -> None:
        self._admin = make_admin(bootstrap)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="topics-ahead")
        self._ahead: dict[str, Future[str]] = {}

    def _create(self, suffix: str) -> str:
        name = f"t{uuid.uuid4().hex[:10]}"
        create_topics(self._admin, name + suffix)
        return name

    def take(self, suffix: str) -> str:
        """An experiment whose `<name><suffix>` topics exist; the next one's are started."""
        ready = self._ahead.pop(suffix, None) or self._thread.submit(self._create, suffix)
        self._ahead[suffix] = self._thread.submit(self._create, suffix)
        return ready.result()

    def delete(self, name: str) -> None:
        """Delete the experiment's topics and those of experiments named after it, without waiting."""
        self._thread.submit(delete_topics, self._admin, f"agl.{name}")

    def close(self) -> None:
        for made in self._ahead.values():
            self.delete(made.result())
        self._thread.shutdown(wait=True)


@pytest.fixture(scope="session")
def topics_ahead(bootstrap: str) -> Iterator[TopicsAhead]:
    ahead = TopicsAhead(bootstrap)
    yield ahead
    ahead.close()


@pytest.fixture
def experiment(bootstrap: str, request: pytest.FixtureRequest, topics_ahead: TopicsAhead) -> Iterator[str]:
    """A fresh experiment per test: its own topics, so tests never see each other's events.

    Its topics, and those of experiments named after it (`<experiment>-...`), are deleted afterwards:
    a broker keeps several open files per partition, and a whole run would otherwise exhaust them.
    A test that reaches it at run time (`request.getfixturevalue`) must be marked `kafka` too.
    A contract test's (one using `store` or `store_factory`) gets one whose store topics exist already.
    """
    require_kafka_marker(request.node)
    contract = [suffix for fixture, suffix in CONTRACT_EXPERIMENTS.items() if fixture in request.fixturenames]
    name = topics_ahead.take(contract[0]) if contract else f"t{uuid.uuid4().hex[:10]}"
    yield name
    topics_ahead.delete(name)


@pytest.fixture
def settings(bootstrap: str, experiment: str) -> Settings:
    return Settings.from_env(experiment=experiment, bootstrap=bootstrap)


class FakeClock:
    """The store's clock, moved by the test: timeouts and heartbeats are tested without sleeping."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[object]:
    """The same contract on both backends: the in-memory reference and the Kafka store on the real broker.

    Both run on the test's fake `clock`, and the watchdog debounce is 0 (scan before every listed call), so
    timeout tests advance the clock instead of waiting.
    """
    if request.param == "memory":
        from agl_events.store.memory import InMemoryLightningStore

        memory = InMemoryLightningStore(scan_debounce_seconds=0, clock=clock)
        yield memory
        await memory.close()
        return
    from agl_events.store.kafka import KafkaLightningStore

    cfg: Settings = request.getfixturevalue("settings")
    kafka = await KafkaLightningStore.open(cfg, view_dir=tmp_path / "view", scan_debounce_seconds=0, clock=clock)
    yield kafka
    await kafka.close()

"""Agent Lightning's contract over REST (`test_rest_api`'s tests, upstream's unchanged client) against a store
group: three store servers share each experiment by partition (each folding only its own), the client talks to
one of them, and whatever the others own is forwarded there, reads too; queries over all rollouts fan out. The
same assertions hold: FIFO per store, exactly-once dequeue, sequence ids, read-your-writes on the server
written through.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agl_events.config import Settings
from agl_events.store.contract import LightningStore
from agl_events.store.kafka import KafkaLightningStore
from tests.eventually import eventually_async
from tests.server.conftest import RunningServer, StoreFor
from tests.server.test_rest_api import *  # noqa: F403  (the same tests, collected here against the group)

pytestmark = pytest.mark.kafka
PEERS = ("peer-1", "peer-2")


@pytest.fixture
def server(settings: Settings, tmp_path: Path, start_server: Callable[[StoreFor], RunningServer]) -> RunningServer:
    """The server under test; two peer servers join each experiment's store group as the first one opens it,
    and the test starts once each owns some partitions. (`settings` first: its experiment's topics outlive the
    servers.)"""
    prefix = settings.experiment
    urls: dict[str, str] = {}

    def kafka_name(name: str) -> str:  # a forwarded request names the experiment as the log does
        return name if name.startswith(prefix) else f"{prefix}-{name}"

    def store_for(role: str) -> StoreFor:
        async def open_store(experiment: str) -> LightningStore:
            name = kafka_name(experiment)
            store = await KafkaLightningStore.open(settings.model_copy(update={"experiment": name}),
                                                   view_dir=tmp_path / role / name, scan_debounce_seconds=0,
                                                   advertise_url=urls[role])
            if role == "tested":
                async with httpx.AsyncClient(timeout=60) as http:
                    for peer in PEERS:
                        opened = await http.get(f"{urls[peer]}/experiments/{name}/v1/agl/statistics")
                        assert opened.status_code == 200, opened.text
                await _settled(store)
            return store  # type: ignore[return-value]

        return open_store

    for peer in PEERS:
        urls[peer] = start_server(store_for(peer)).url
    tested = start_server(store_for("tested"))
    urls["tested"] = tested.url
    return tested


async def _settled(store: KafkaLightningStore, timeout: float = 60.0) -> None:
    """Until `store` owns some but not all partitions and knows an owner for each."""
    ownership = store.group.router.ownership
    assert ownership is not None
    await eventually_async(lambda: ownership, "the store group settled", within=timeout,
                           until=lambda it: bool(it.owned) and len(it.owned) < it.partitions
                           and len(it.owners) == it.partitions)

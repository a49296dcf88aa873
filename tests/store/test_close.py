"""A Kafka store closes once, whoever asks and however often, even when the first caller stops waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agl_events.config import Settings
from agl_events.log.clients import make_admin
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.membership import StoreGroup, group_id
from agl_events.views.rocks import RocksKV

pytestmark = pytest.mark.kafka


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

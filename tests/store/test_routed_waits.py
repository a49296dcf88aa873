"""Waits in a store group, without a broker: a rollout's owner waits for it in its own view, and a wait whose
partition is handed over meanwhile goes on at the new owner (this store's view stops folding that partition, so
it would never see the rollout finish)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from agl_events.reducers import keys
from agl_events.store import route_table as routes
from agl_events.store import routed_reads
from agl_events.store.ownership import Ownership
from agl_events.store.peers import PeerStores
from agl_events.store.reads import Reads
from agl_events.store.routed_reads import RoutedReads
from agl_events.store.routing import Router
from agl_events.store.waits import Waits
from agl_events.types import Rollout
from agl_events.views.kv import DictKV
from agl_events.views.store_view import StoreView

HERE = "http://store-a:4747"
NEW_OWNER = "http://store-b:4747"


class NewOwner(PeerStores):
    """The store the partition moved to: the rollout finished there; what it was asked is kept."""

    def __init__(self, finished: Rollout) -> None:
        super().__init__("exp")
        self.finished = finished
        self.asked: list[tuple[str, str, Any]] = []

    async def call(self, owner: str, method: str, path: str, body: Any = None, *,
                   partitions: Iterable[int] | None = None) -> Any:
        self.asked.append((owner, path, body))
        return [self.finished.model_dump(mode="json")]


class SeenWaits(Waits):
    """The store's waits, saying when a wait began (it registers its waiters before it first suspends)."""

    def __init__(self, view: StoreView) -> None:
        super().__init__(view, lambda: None)
        self.began = asyncio.Event()

    async def wait(self, rollout_ids: Sequence[str], timeout: float | None) -> list[Rollout]:
        self.began.set()
        return await super().wait(rollout_ids, timeout)


async def test_a_wait_whose_partition_is_handed_over_goes_on_at_the_new_owner() -> None:
    """It waited on in this view, which no longer folds the partition, and missed the finish until its timeout
    (None: for ever)."""
    running = Rollout(rollout_id="ro-1", input=1, start_time=1.0, status="running")
    view = StoreView(DictKV())
    view.kv.write({keys.rollout("ro-1"): running.model_dump(mode="json")})
    ownership = Ownership(partitions=1, own_url=HERE)
    ownership.acquire([0])
    ownership.acquired([0])
    new_owner = NewOwner(running.model_copy(update={"status": "succeeded", "end_time": 2.0}))
    waits = SeenWaits(view)
    reads = RoutedReads(Reads(view), waits, Router(ownership, new_owner))

    waiting = asyncio.create_task(reads.wait_for_rollouts(["ro-1"], timeout=5.0))
    await waits.began.wait()
    ownership.release([0])  # handed over: the view here stops folding partition 0
    ownership.learn({0: NEW_OWNER})

    assert [(r.rollout_id, r.status) for r in await waiting] == [("ro-1", "succeeded")]
    assert [(owner, path, body["rollout_ids"]) for owner, path, body in new_owner.asked] == [
        (NEW_OWNER, routes.WAIT_ROLLOUTS.path, ["ro-1"])]


class SlowOwner(PeerStores):
    """The owner: the rollout finishes there during the second slice of a forwarded wait."""

    def __init__(self, finished: Rollout) -> None:
        super().__init__("exp")
        self.finished = finished
        self.slices = 0

    async def call(self, owner: str, method: str, path: str, body: Any = None, *,
                   partitions: Iterable[int] | None = None) -> Any:
        self.slices += 1
        return [self.finished.model_dump(mode="json")] if self.slices > 1 else []


async def test_a_wait_without_timeout_at_another_owner_lasts_until_the_rollout_finishes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """timeout None waits for ever (upstream's contract); at another owner it is asked in slices, and it returned
    after the first with nothing (the last-slice test took the slice for all that was left)."""
    monkeypatch.setattr(routed_reads, "FORWARDED_WAIT_SECONDS", 0.01)
    ownership = Ownership(partitions=1, own_url=HERE)
    ownership.learn({0: NEW_OWNER})
    view = StoreView(DictKV())
    owner = SlowOwner(Rollout(rollout_id="ro-1", input=1, start_time=1.0, status="succeeded", end_time=2.0))
    reads = RoutedReads(Reads(view), Waits(view, lambda: None), Router(ownership, owner))

    assert [r.rollout_id for r in await reads.wait_for_rollouts(["ro-1"], timeout=None)] == ["ro-1"]
    assert owner.slices == 2

"""Queries over all rollouts in a store group, without a broker: each member answers for its share of the
partitions, and a member that no longer owns its share refuses it (421) until the group names the new owner; one
still catching up a share it took over refuses it until it has."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest

from agl_events.store import routed_reads
from agl_events.store.errors import NotOwnerError
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
OLD_OWNER = "http://store-old:4747"
NEW_OWNER = "http://store-new:4747"


class Members(PeerStores):
    """The old owner of partition 0 refuses its share; the new one answers it with one rollout. Who was asked is
    kept."""

    def __init__(self, rollout: Rollout) -> None:
        super().__init__("exp")
        self.rollout = rollout
        self.asked: list[str] = []

    async def call(self, owner: str, method: str, path: str, body: Any = None, *,
                   partitions: Iterable[int] | None = None) -> Any:
        self.asked.append(owner)
        if owner != NEW_OWNER:
            raise NotOwnerError(f"partitions {sorted(partitions or [])} are not owned here")
        return {"items": [self.rollout.model_dump(mode="json")], "total": 1}


class CatchingUp(Members):
    """The new owner, listed by the group already, refuses its first share: its view still folds the partition
    it took over (a member owns a partition only once caught up)."""

    async def call(self, owner: str, method: str, path: str, body: Any = None, *,
                   partitions: Iterable[int] | None = None) -> Any:
        if not self.asked:
            self.asked.append(owner)
            raise NotOwnerError(f"partitions {sorted(partitions or [])} are not owned here")
        return await super().call(owner, method, path, body, partitions=partitions)


async def _all_rollouts(reads: RoutedReads) -> tuple[list[str], int]:
    """The rollout ids and total of a query over all rollouts."""
    page = await reads.query_rollouts(status_in=None, rollout_id_in=None, rollout_id_contains=None,
                                      filter_logic="and", sort_by=None, sort_order="asc", limit=10, offset=0,
                                      status=None, rollout_ids=None)
    return [r.rollout_id for r in page.items], page.total


async def test_a_query_refused_by_a_former_owner_asks_it_no_more_and_answers_once_the_group_names_the_new_one(
        ) -> None:
    """The group's next description, a moment after the refusal, still lists the old owner (the coordinator had
    not heard of the change yet); the one after names the new owner. The old owner was asked again every 0.25 s
    on the stale map, refused each time."""
    ownership = Ownership(partitions=1, own_url=HERE)
    ownership.learn({0: OLD_OWNER})
    loop = asyncio.get_running_loop()
    described: list[str] = []

    def describe_again() -> None:  # the membership thread answers a moment after it is asked
        owner = OLD_OWNER if not described else NEW_OWNER
        described.append(owner)
        loop.call_soon(ownership.learn, {0: owner})

    view = StoreView(DictKV())
    members = Members(Rollout(rollout_id="ro-1", input=1, start_time=1.0, status="queuing"))
    reads = RoutedReads(Reads(view), Waits(view, lambda: None), Router(ownership, members, refresh=describe_again))

    assert await _all_rollouts(reads) == (["ro-1"], 1)
    assert members.asked == [OLD_OWNER, NEW_OWNER]
    assert described == [OLD_OWNER, NEW_OWNER]


async def test_a_query_refused_by_an_owner_still_catching_up_asks_it_again_and_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The group lists the new owner throughout (it is right: no other owner will come); the owner refuses while
    it catches up, then answers. Asking again only once the group listed another owner waited out the route's
    whole wait (here shortened) and failed with NoOwnerError."""
    monkeypatch.setattr(routed_reads, "ROUTE_WAIT_SECONDS", 6.0)
    ownership = Ownership(partitions=1, own_url=HERE)
    ownership.learn({0: NEW_OWNER})
    loop = asyncio.get_running_loop()
    members = CatchingUp(Rollout(rollout_id="ro-1", input=1, start_time=1.0, status="queuing"))
    router = Router(ownership, members, refresh=lambda: loop.call_soon(ownership.learn, {0: NEW_OWNER}))
    view = StoreView(DictKV())
    reads = RoutedReads(Reads(view), Waits(view, lambda: None), router)

    assert await _all_rollouts(reads) == (["ro-1"], 1)
    assert members.asked == [NEW_OWNER, NEW_OWNER]

"""Routing in a store group, without a broker: the router over a hand-fed `Ownership` (what the group said)."""

from __future__ import annotations

import asyncio

import pytest

from agl_events.store.errors import NoOwnerError, NotOwnerError
from agl_events.store.ownership import Ownership, Placement
from agl_events.store.peers import PeerUnavailableError
from agl_events.store.routing import Router

HERE = "http://store-a:4747"
DEAD = "http://store-dead:4747"
LIVE = "http://store-live:4747"


def group(owners: dict[int, str]) -> tuple[Ownership, Router, list[str]]:
    """A store owning nothing (a group with more stores than partitions, or one still joining) whose group
    lists `owners`; refreshing it (a new describe of the group) says the live store owns everything now."""
    ownership = Ownership(partitions=2, own_url=HERE)
    ownership.learn(owners)
    refreshed: list[str] = []

    def refresh() -> None:
        refreshed.append("describe")
        ownership.learn({0: LIVE, 1: LIVE})

    return ownership, Router(ownership, refresh=refresh), refreshed


async def test_a_new_rollout_goes_to_a_live_store_when_the_listed_one_is_gone() -> None:
    """A store killed a moment ago is still listed until its session times out: creating a rollout there must
    not fail the caller (it did: a 500 for every enqueue), the group is asked again and a live store creates it."""
    _, router, refreshed = group({0: DEAD, 1: DEAD})
    tried: list[str] = []

    async def here() -> str:
        raise AssertionError("this store owns nothing: it must not create rollouts")

    async def there(owner: str) -> str:
        tried.append(owner)
        if owner == DEAD:
            raise PeerUnavailableError(f"store {owner} unreachable: ConnectError")
        return f"created at {owner}"

    assert await router.create(here, there) == f"created at {LIVE}"
    assert tried == [DEAD, LIVE]
    assert refreshed == ["describe"]


async def test_a_store_owning_a_partition_creates_rollouts_itself() -> None:
    ownership, router, _ = group({1: LIVE})
    ownership.acquire([0])
    ownership.acquired([0])

    async def there(owner: str) -> str:
        raise AssertionError(f"forwarded to {owner} though this store owns a partition")

    async def here() -> str:
        return "created here"

    assert await router.create(here, there) == "created here"


async def test_creating_gives_up_with_no_owner_once_the_store_stops() -> None:
    """Nothing answers and the store shuts down: the caller gets a 503 (NoOwnerError), not a wait or a 500."""
    ownership = Ownership(partitions=2, own_url=HERE)
    ownership.learn({0: DEAD, 1: DEAD})
    router = Router(ownership)

    async def here() -> str:
        raise AssertionError("owns nothing")

    async def there(owner: str) -> str:
        router.stop()
        raise PeerUnavailableError(f"store {owner} unreachable")

    with pytest.raises(NoOwnerError):
        await router.create(here, there)


async def test_a_refused_forward_is_sent_again_once_the_group_has_said_who_owns_the_partition_now() -> None:
    """A forward refused with 421 (the listed owner no longer owns the partition) waits for the next description
    of the group, which the membership thread answers a moment after `refresh`; it was sent again at once on the
    stale map, and the 3-store chaos run's store-0 refused the same finish 19 times in a row."""
    ownership = Ownership(partitions=2, own_url=HERE)
    ownership.learn({0: DEAD, 1: DEAD})
    loop = asyncio.get_running_loop()
    router = Router(ownership, refresh=lambda: loop.call_soon(ownership.learn, {0: LIVE, 1: LIVE}))
    tried: list[str] = []

    async def here() -> str:
        raise AssertionError("this store owns nothing")

    async def there(owner: str) -> str:
        tried.append(owner)
        if owner != LIVE:
            raise NotOwnerError(f"rollout ro-1 is not owned by {owner}")
        return f"finished at {owner}"

    assert await router.run("ro-1", here, there) == f"finished at {LIVE}"
    assert tried == [DEAD, LIVE]



async def test_a_store_still_catching_up_says_so_when_it_gives_up() -> None:
    """A store alone in its group with a long history folds its partitions before deciding: past the wait, the
    503 says that, not that no store of the group owns them (what a user with one store was told)."""
    ownership = Ownership(partitions=3, own_url=HERE)
    ownership.acquire([0, 1, 2])
    ownership.acquired([2])
    router = Router(ownership)
    gone = 0.0  # a deadline already past: the wait gives up at once
    with pytest.raises(NoOwnerError, match=r"still catching up partitions \[0, 1\].*1 of 3 partitions ready here"):
        await router.shares(gone)
    in_partition_1 = Placement(3, frozenset({1})).new_rollout_id()
    with pytest.raises(NoOwnerError, match=rf"still catching up partitions \[1\].*rollout {in_partition_1}'s"):
        await router.owner_of(in_partition_1, gone)
    ownership.acquired([0, 1])
    ownership.release([1])  # handed on, and the group has not said to whom yet: nobody is catching it up here
    with pytest.raises(NoOwnerError, match=r"^no store of the group owns every partition"):
        await router.shares(gone)


def test_a_partition_handed_on_during_its_catch_up_is_not_taken_when_the_catch_up_ends() -> None:
    """A take-over outlasting its callback's bound goes on while the group revokes the partition; when its fold
    ends it must not make the partition ours again (two stores would decide for it)."""
    ownership = Ownership(partitions=3, own_url=HERE)
    ownership.acquire([0, 1])
    ownership.release([1])
    assert ownership.acquired([0, 1]) == frozenset({0})
    assert ownership.owned == frozenset({0})
    assert ownership.owner_of(1) is None

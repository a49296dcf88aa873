"""Where a command about a rollout is decided: here, or at the store owning its partition (`store.ownership`).

A command for a rollout is decided here when this store owns the rollout's partition, else sent to the owner
(`store.peers`). Ownership can move at any time (a store joins, leaves or dies), so both ways retry: a command
decided here re-checks ownership in its decision (`owned`), and a forwarded one that finds its owner gone or
no longer owning asks again once the group has said who owns the partition now. After `ROUTE_WAIT_SECONDS`
without an owner, the caller gets `NoOwnerError` (503); so does every call still waiting for one when the store
closes (`stop`), so that a shutdown never waits for a group that will not assign anything any more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from agl_events.store.context import DecisionContext
from agl_events.store.errors import NoOwnerError, NotOwnerError
from agl_events.store.ownership import EVERYWHERE, Ownership, Placement
from agl_events.store.peers import FORWARDED, PeerStores, PeerUnavailableError

T = TypeVar("T")
#: How long a command waits for its rollout's partition to have an owner: a rebalance after a store died
#: takes the broker's `group.consumer.session.timeout.ms` (6 s on the local broker and in deploy/, 45 s by
#: Kafka's default) plus the new owner's catch-up.
ROUTE_WAIT_SECONDS = 60.0
#: Pause before asking again after an owner could not be reached (it may be dying: the group will say).
RETRY_SECONDS = 0.25
#: Pause before asking again an owner that refused (421) while the group still lists it: longer than the group
#: takes to list another owner (a description asked at once, then every second), short beside a take-over's
#: catch-up.
REFUSED_RETRY_SECONDS = 2.0


def owned(rids: str | Sequence[str], command: Callable[[DecisionContext], T]) -> Callable[[DecisionContext], T]:
    """`command`, refused with NotOwnerError if, when it is decided, this store no longer owns `rids`."""
    listed = [rids] if isinstance(rids, str) else rids

    def decide(ctx: DecisionContext) -> T:
        for rid in listed:
            if not ctx.placement.owns(rid):
                raise NotOwnerError(f"rollout {rid} is in partition {ctx.placement.partition(rid)}, not owned here")
        return command(ctx)

    return decide


class Router:
    """Routes for one store: `ownership` None means this store decides everything (no store group)."""

    def __init__(self, ownership: Ownership | None = None, peers: PeerStores | None = None,
                 refresh: Callable[[], None] = lambda: None) -> None:
        self.ownership = ownership
        self.peers = peers
        #: Asks the store group to describe who owns what again (set once the group exists).
        self.refresh = refresh
        self._stopped = False

    def stop(self) -> None:
        """The store is closing: calls waiting for an owner get NoOwnerError now, and later ones at once."""
        self._stopped = True
        if self.peers is not None:
            self.peers.stop()
        if self.ownership is not None:
            self.ownership.wake()

    def _check_running(self) -> None:
        if self._stopped:
            raise NoOwnerError("the store is shutting down; ask another store of the group, or again later")

    @property
    def placement(self) -> Placement:
        return EVERYWHERE if self.ownership is None else self.ownership.placement

    async def _changed(self, deadline: float, what: str, partitions: Iterable[int] = ()) -> None:
        """Wait for the group to change (or a second, then ask it again); NoOwnerError past `deadline`, saying
        why `partitions` (`what`) have no owner."""
        assert self.ownership is not None
        self._check_running()
        left = deadline - time.monotonic()
        if left <= 0:
            raise NoOwnerError(f"{self.ownership.unowned(what, partitions)} (waited {ROUTE_WAIT_SECONDS:.0f} s)")
        try:
            await asyncio.wait_for(self.ownership.changed.wait(), min(left, 1.0))
        except TimeoutError:
            self.refresh()
        self._check_running()

    async def owner_of(self, rid: str, deadline: float) -> str | None:
        """None to decide here, or the URL of the store that owns `rid`'s partition."""
        if self.ownership is None:
            return None
        while True:
            self._check_running()
            where = self.ownership.where(rid)
            if where == self.ownership.own_url:
                return None
            if FORWARDED.get() and rid and self.ownership.placement.partition(rid) not in self.ownership.acquiring:
                raise NotOwnerError(f"rollout {rid} is not owned by {self.ownership.own_url}")
            if where is not None:
                return where
            await self._changed(deadline, f"rollout {rid}'s partition", [self.ownership.placement.partition(rid)])

    async def shares(self, deadline: float) -> dict[str | None, frozenset[int]]:
        """Every partition by its owner (None: here), once each has one: who answers for what in a query
        over all rollouts."""
        assert self.ownership is not None
        while True:
            self._check_running()
            owners = {p: self.ownership.owner_of(p) for p in range(self.ownership.partitions)}
            if None not in owners.values():
                shares: dict[str | None, set[int]] = {}
                for partition, url in owners.items():
                    shares.setdefault(None if url == self.ownership.own_url else url, set()).add(partition)
                return {url: frozenset(partitions) for url, partitions in shares.items()}
            await self._changed(deadline, "every partition", [p for p, url in owners.items() if url is None])

    async def moved(self, owner: str, partitions: frozenset[int], deadline: float) -> None:
        """Returns once the group no longer lists `owner` as owning any of `partitions` (which it refused: 421),
        or after `REFUSED_RETRY_SECONDS` while it still does, asking the group again now and each second without
        news. A map that still lists it is either stale (asking again would only be refused again) or right
        about a member still catching up the partitions it took over (it refuses until its view has folded
        them, then answers): only time tells them apart. NoOwnerError past `deadline`."""
        assert self.ownership is not None
        self.refresh()
        again = time.monotonic() + REFUSED_RETRY_SECONDS
        while any(self.ownership.owner_of(p) == owner for p in partitions):
            await self._changed(deadline, f"partitions {sorted(partitions)}, which {owner} refused", partitions)
            if time.monotonic() >= again:
                return

    async def run(self, rid: str, here: Callable[[], Awaitable[T]], there: Callable[[str], Awaitable[T]]) -> T:
        """`here()` if this store owns `rid`, else `there(owner_url)`; again wherever ownership moved."""
        async def listed(answer: Awaitable[T]) -> list[T]:
            return [await answer]

        return (await self.run_many([rid], lambda _: listed(here()), lambda url, _: listed(there(url))))[0]

    async def run_many(self, rids: Sequence[str], here: Callable[[list[int]], Awaitable[list[T]]],
                       there: Callable[[str, list[int]], Awaitable[list[T]]], deadline: float | None = None
                       ) -> list[T]:
        """A batch about several rollouts: the indices of each owner's rollouts go to `here` or `there` (one
        call per owner, concurrently); the answers come back in the batch's order. A part whose owner changed
        under it is routed again."""
        if self.ownership is None:
            return await here(list(range(len(rids))))
        deadline = deadline if deadline is not None else time.monotonic() + ROUTE_WAIT_SECONDS
        groups: dict[str | None, list[int]] = {}
        for i, rid in enumerate(rids):
            groups.setdefault(await self.owner_of(rid, deadline), []).append(i)

        async def part(owner: str | None, indices: list[int]) -> list[T]:
            refused = False
            try:
                return await (here(indices) if owner is None else there(owner, indices))
            except NotOwnerError:
                if FORWARDED.get() and owner is None:
                    raise
                refused = owner is not None
            except PeerUnavailableError:
                self._check_running()
                await asyncio.sleep(RETRY_SECONDS)
            self._check_running()
            self.refresh()
            if refused:  # the owner we listed says it is not: ask again once the group has said who is
                await self._changed(deadline, f"the partitions of {len(indices)} rollouts")
            if time.monotonic() > deadline:
                raise NoOwnerError(f"no store of the group decided for {len(indices)} rollouts within "
                                   f"{ROUTE_WAIT_SECONDS} s")
            return await self.run_many([rids[i] for i in indices], lambda js: here([indices[j] for j in js]),
                                       lambda url, js: there(url, [indices[j] for j in js]), deadline)

        answers = await asyncio.gather(*(part(owner, indices) for owner, indices in groups.items()))
        ordered: list[Any] = [None] * len(rids)
        for indices, answer in zip(groups.values(), answers, strict=True):
            for i, value in zip(indices, answer, strict=True):
                ordered[i] = value
        return ordered

    async def creator(self) -> str | None:
        """Where new rollouts are created: here (None) while this store owns a partition, else at another
        store that does (a group with more stores than partitions)."""
        if self.ownership is None:
            return None
        deadline = time.monotonic() + ROUTE_WAIT_SECONDS
        while True:
            self._check_running()
            if self.ownership.owned:
                return None
            others = self.ownership.any_other()
            if others and not self.ownership.acquiring:
                return others[hash(time.monotonic()) % len(others)]
            await self._changed(deadline, "any partition", self.ownership.acquiring)

    async def create(self, here: Callable[[], Awaitable[T]], there: Callable[[str], Awaitable[T]]) -> T:
        """New rollouts: `here()` while this store owns a partition, else `there(url)` at a store that does.
        An owner that cannot be reached (it may have died and still be listed until its session times out) is
        not the caller's error: the group is asked again and another store, or this one once it owns a
        partition, creates the rollouts; NoOwnerError (503) after `ROUTE_WAIT_SECONDS`."""
        deadline = time.monotonic() + ROUTE_WAIT_SECONDS
        while True:
            elsewhere = await self.creator()
            if elsewhere is None:
                return await here()
            try:
                return await there(elsewhere)
            except PeerUnavailableError as exc:
                self.refresh()
                if time.monotonic() > deadline:
                    raise NoOwnerError(f"no store of the group could create rollouts within "
                                       f"{ROUTE_WAIT_SECONDS:.0f} s (last: {exc})") from exc
                await asyncio.sleep(RETRY_SECONDS)

    async def owning(self) -> None:
        """Wait until this store owns a partition (an ingester creates rollouts only where it decides)."""
        while self.ownership is not None and not self.ownership.owned:
            self._check_running()
            await self.ownership.changed.wait()

    def others(self) -> list[str]:
        """The other stores owning partitions, for a dequeue that found nothing here (never when forwarded)."""
        if self.ownership is None or FORWARDED.get():
            return []
        return self.ownership.any_other()

"""The store's part in a store group: forwarding to a rollout's owner, taking partitions over, handing them on.

`router` says where each command is decided (`store.routing`); this part sends a command to its owner through
the shared route table (`store.route_table`); reads about the rollout go to the owner too (`store.routed_reads`),
whose view holds what it decided, so nothing here waits for this store's view. It is what the group's
membership (`store.membership`) calls when partitions move: the partitions folded here move with them
(`store.partition_folds`). Outside a group the router decides everything here and nothing of this part runs but
`describe` (None) and `stop`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agl_events.store.heartbeats import watch_from_now
from agl_events.store.partition_folds import PartitionFolds
from agl_events.store.route_table import Route
from agl_events.store.routing import Router
from agl_events.store.writes import FoldWaiter, Writes
from agl_events.topics import Topic

log = logging.getLogger(__name__)
#: What the previous owner of a partition may have written: folded to the log's end before deciding for it.
OWNED_FOLDS = (Topic.ROLLOUTS, Topic.ATTEMPTS, Topic.SPANS)


class Group:
    """Forwarding and partition moves for one store (`writes` decides what becomes ours)."""

    def __init__(self, router: Router, folds: FoldWaiter, writes: Writes,
                 partition_folds: PartitionFolds | None = None) -> None:
        """`partition_folds`: which partitions this store folds, moved with ownership (None: it folds all)."""
        self.router = router
        self._folds = folds
        self._writes = writes
        self._partition_folds = partition_folds

    async def forward(self, owner: str, route: Route, body: Any, **params: str) -> Any:
        """`route` (with `params`) at the store `owner`: its answer, or its error raised here."""
        assert self.router.peers is not None, "a store group has peers"
        return await self.router.peers.call(owner, route.method, route.url(**params), body)

    async def _folded(self) -> None:
        await asyncio.gather(*(self._folds.wait_folded(topic) for topic in OWNED_FOLDS))

    async def catch_up_rollouts(self) -> None:
        """Fold the rollouts topic up to its end (an ingester taking over task-requests partitions)."""
        await self._folds.wait_folded(Topic.ROLLOUTS)

    async def take_over(self, partitions: set[int]) -> None:
        """The store group gave us `partitions`: fold what their previous owner wrote (it drained, or died with
        its last acknowledged events in the log; from where this store's view left them), then decide for them,
        and announce their queue again."""
        ownership = self.router.ownership
        assert ownership is not None
        ownership.acquire(partitions)
        if self._partition_folds is not None:
            await self._partition_folds.take(partitions)
        await self._folded()
        taken = ownership.acquired(partitions)
        if not taken:
            log.info("partitions %s were handed on while this store caught them up", sorted(partitions))
            return
        announced = await self._writes.announce_queued()
        watched = await self._writes.decide(lambda ctx: watch_from_now(ctx, taken))
        log.info("took over partitions %s (%d queued rollouts announced again, %d running attempts watched from "
                 "now)", sorted(taken), announced, watched)

    async def hand_over(self, partitions: set[int]) -> None:
        """The store group takes `partitions` away: stop deciding for them, and return once everything decided
        for them so far is durable, before the next owner starts from the log."""
        assert self.router.ownership is not None
        self.router.ownership.release(partitions)
        await self._writes.drain()
        if self._partition_folds is not None:
            await self._partition_folds.drop(partitions)

    def describe(self) -> dict[str, Any] | None:
        """Who decides what (`statistics`, which `agl-events status` and clients read); None outside a group."""
        ownership = self.router.ownership
        if ownership is None:
            return None
        return {"url": ownership.own_url, "partitions": ownership.partitions, "owned": sorted(ownership.owned),
                "owners": {str(p): url for p, url in sorted(ownership.owners.items())}}

    def stop(self) -> None:
        """Calls waiting for an owner get a 503 now, later ones at once (the store is shutting down)."""
        self.router.stop()

    async def close(self) -> None:
        if self.router.peers is not None:
            await self.router.peers.close()

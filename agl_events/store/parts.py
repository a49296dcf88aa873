"""The parts of one event-sourced store, wired from what its backend supplies, and their lifecycle.

Reads answer from the view (in a store group, the owner's or every member's: the routed reads); writes decide
through the committer; routed commands go to the store owning a rollout's partition (the group part); waits
answer long polls as rollouts finish; the watchdog and the heartbeats decide what time and foreign spans imply.
The follower feeds every folded batch to waits, fold listeners and heartbeats; a failure of the fold stops the
store for good. `store.service` is the facade.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.store.backend import Backend, Companion
from agl_events.store.committer import Committer
from agl_events.store.contract import LightningStore
from agl_events.store.errors import StoreUnhealthyError
from agl_events.store.group import Group
from agl_events.store.heartbeats import Heartbeats
from agl_events.store.reads import Reads
from agl_events.store.routed import Routed
from agl_events.store.routed_reads import RoutedReads
from agl_events.store.waits import Waits
from agl_events.store.watchdog import Watchdog
from agl_events.store.writes import Refusal, Writes

log = logging.getLogger(__name__)


class StoreParts:
    """Everything `store` (the facade) is made of. Background work (follower, watchdog) runs from `start()`, or from the
    first call for stores built outside an event loop; `close()` stops all of it, once."""

    def __init__(self, store: LightningStore, backend: Backend, *, scan_debounce_seconds: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.backend = backend
        self.clock = clock
        self.started = clock()
        #: Why the store stopped serving, once it did; None while it serves.
        self.failure: BaseException | None = None
        self.failure_listeners: list[Callable[[BaseException], None]] = []
        self.fold_listeners: list[Callable[[list[LoggedEvent]], None]] = []
        self.closed = False
        self._running = False
        self._closing: asyncio.Future[None] | None = None
        self.reads = Reads(backend.view)
        self.waits = Waits(backend.view, lambda: self.failure)
        follower, router = backend.follower, backend.router
        if backend.log is None or follower is None:
            refusal = Refusal(backend.refusal)
            self.writes = Writes(refusal, refusal, self.check_serving)
        else:
            committer = Committer(backend.log, backend.view, backend.producer_id, self.waits.notify, clock,
                                  on_fold_failure=self._on_failure, placement=lambda: router.placement)
            follower.landing = committer.landing
            self.writes = Writes(committer, follower, self.check_serving,
                                 lambda: {"committer": committer.backpressure.stats, **backend.log_queues()},
                                 backend.log.close)
        self.group = Group(router, follower or Refusal(backend.refusal), self.writes, backend.partition_folds)
        self.routed = Routed(self.writes, self.group)
        self.routed_reads = RoutedReads(self.reads, self.waits, router)
        self.watchdog: Watchdog | None = None
        self.heartbeats: Heartbeats | None = None
        if follower is not None:
            follower.on_folded, follower.on_failure = self._on_folded, self._on_failure
            self.watchdog = Watchdog(backend.view, self.writes.decide, clock, scan_debounce_seconds)
            self.heartbeats = Heartbeats(backend.producer_id, self.writes.decide)
        self.companions: dict[str, Companion] = {name: build(store, self.group)
                                               for name, build in backend.companions.items()}

    async def start(self) -> int:
        """Catch the view up with the log (the store answers nothing before), follow it, run the watchdog,
        announce the queue again, start the companions. Returns how many events the catch-up folded."""
        follower = self.backend.follower
        if follower is None:
            return 0
        applied = await follower.catch_up()
        self._run_background()
        if next(self.backend.view.scan(keys.QUEUE), None) is not None:
            log.info("announced %d queued rollouts to the runners again", await self.writes.announce_queued())
        for companion in self.companions.values():
            companion.start()
        return applied

    def _run_background(self) -> None:
        if not self._running and not self.closed and self.backend.follower is not None:
            self._running = True
            self.backend.follower.start()
            if self.watchdog is not None:
                self.watchdog.start()

    def check_serving(self) -> None:
        """Raise StoreUnhealthyError once the store failed or closed; start background work on first use."""
        if self.failure is not None:
            raise StoreUnhealthyError(f"the store stopped serving: {self.failure}") from self.failure
        if self.closed:
            raise StoreUnhealthyError("the store is closed")
        self._run_background()

    async def before_call(self) -> None:
        """Upstream's `@healthcheck_before`: serving, and the watchdog's scan if one is due on its clock."""
        self.check_serving()
        if self.watchdog is not None:
            await self.watchdog.before_call()

    def _on_folded(self, events: list[LoggedEvent]) -> None:
        """Every batch the follower folded: wake waiters, tell the listeners, take foreign spans as heartbeats."""
        self.waits.notify(events)
        for listener in self.fold_listeners:
            listener(events)
        if self.heartbeats is not None:
            self.heartbeats.observe(events)

    def _on_failure(self, error: BaseException) -> None:
        """The view stopped following: fail every waiter and every later call, tell the listeners once."""
        self.failure = error
        self.waits.answer_all()  # they see the failure when they wake
        for listener in self.failure_listeners:
            listener(error)

    async def statistics(self, name: str) -> dict[str, Any]:
        """Totals by entity (a group's through any member), uptime, and in a store group who decides what
        (`agl-events status` shows it), which partitions the totals left out (no owner at the time), and what
        this member's own view folded (its partitions, and those it owned before)."""
        counts, uncounted = await self.routed_reads.counts()
        stats: dict[str, Any] = {"name": name, **{f"total_{k}": v for k, v in counts.items()},
                                 "uptime": self.clock() - self.started}
        group = self.group.describe()
        if group is not None:
            stats["store_group"] = {**group, "uncounted": uncounted, "folded": self.reads.counts()}
        return stats

    def interrupt_waits(self) -> None:
        self.group.stop()  # calls waiting for the group to give a partition an owner get a 503 at once
        self.waits.interrupt()

    async def close(self) -> None:
        """One closing, as a task of its own that a cancelled caller does not cut short (the server gives up
        on a store after `CLOSE_TIMEOUT_SECONDS`), which every later close waits for."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_once())
        await asyncio.shield(self._closing)

    async def _close_once(self) -> None:
        """The router stops first (an ingester waiting to own a partition would wait forever), then the
        companions in reverse (the ingester's last batch still needs the committer; the group hands our
        partitions over, drained), then the store's own work, then the log and the view."""
        self.group.stop()
        for companion in reversed(self.companions.values()):
            await companion.stop()
        await self.group.close()
        self.closed = True
        self.waits.interrupt()
        for part in (self.watchdog, self.heartbeats, self.backend.follower):
            if part is not None:
                await part.stop()
        await self.writes.close()
        if self.backend.follower is not None:
            self.backend.follower.source.close()
        self.backend.view.close()
        self.backend.after_close()

"""The watchdog: rollouts whose attempt timed out or went silent are failed, retried or marked unresponsive, and
rollouts left queued unclaimed are announced to the runners again (`commands.unclaimed`: the task queue can lose a
task record).

It scans the running rollouts (`keys.ACTIVE`) and decides what their clocks imply
(`commands.attempts.scan_unhealthy`), at most once per `debounce` seconds of the clock it is given. Two things
drive it: its own loop, so timeouts fire while nobody calls the store, and `before_call`, the hook the facade
runs before the calls upstream's `@healthcheck_before` marks, so that a caller reads what a scan at that
moment decides (with debounce 0 and a fake clock, as the contract tests run, a scan before every such call).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agl_events.reducers import keys
from agl_events.store.commands import attempts as attempt_cmds
from agl_events.store.commands.unclaimed import Unclaimed, redispatch
from agl_events.store.context import DecisionContext
from agl_events.store.errors import StoreUnhealthyError
from agl_events.views.store_view import StoreView

log = logging.getLogger(__name__)
#: The loop's period floor: a debounce of 0 (scan before every call) must not spin the loop.
MIN_PERIOD_SECONDS = 1.0
#: How long a rollout waits queued and unclaimed before it is announced again (then twice as long, and so on). A
#: task a runner fetched ahead is handed to another within the record lock (5 s) or at once when the runner steps
#: aside, so a minute unclaimed means no runner is free or the record is gone; announcing again costs one record.
REDISPATCH_AFTER_SECONDS = 60.0

Decide = Callable[[Callable[[DecisionContext], Any]], Awaitable[Any]]


class Watchdog:
    """Scans `view` through `decide` (the store's writes), on `clock`, at most once per `debounce` seconds."""

    def __init__(self, view: StoreView, decide: Decide, clock: Callable[[], float], debounce: float) -> None:
        self._view = view
        self._decide = decide
        self._clock = clock
        self._debounce = debounce
        self._last_scan: float | None = None
        self._unclaimed = Unclaimed(REDISPATCH_AFTER_SECONDS)
        self._unclaimed.written(view.scan(keys.QUEUE))  # the queue the view holds now; then as the view writes it
        view.on_written(self._queue_written)
        self._task: asyncio.Task[None] | None = None

    async def before_call(self) -> None:
        """Scan unless the last scan is less than `debounce` ago on the clock."""
        now = self._clock()
        if self._last_scan is not None and now - self._last_scan < self._debounce:
            return
        self._last_scan = now
        await self.scan()

    async def scan(self) -> int:
        """Decide now what the running rollouts' clocks imply; how many attempts changed. Queued rollouts
        unclaimed for long are announced again."""
        unclaimed = self._unclaimed.due(self._clock())
        # in a store group, some are entries of partitions moved away, left stale in this view: not announced here
        announced = await self._decide(lambda ctx: redispatch(ctx, unclaimed)) if unclaimed else 0
        if announced:
            log.warning("announced %d rollouts queued unclaimed for long to the runners again", announced)
        active = [rid[len(keys.ACTIVE):] for rid, _ in self._view.scan(keys.ACTIVE)]
        if not active:
            return 0

        def scan(ctx: DecisionContext) -> int:
            rollouts = [r for r in (ctx.rollout(rid) for rid in active if ctx.placement.owns(rid)) if r is not None]
            return attempt_cmds.scan_unhealthy(ctx, rollouts)

        return int(await self._decide(scan))

    def _queue_written(self, changes: Mapping[str, Any]) -> None:
        self._unclaimed.written((key, rid) for key, rid in changes.items() if key.startswith(keys.QUEUE))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="agl-watchdog")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        """Timeouts fire even when nobody calls the store (upstream only checks before calls)."""
        while True:
            await asyncio.sleep(max(self._debounce, MIN_PERIOD_SECONDS))
            try:
                await self.before_call()
            except StoreUnhealthyError:
                return
            except Exception:  # a failed scan is retried next period; the store keeps serving
                log.exception("watchdog scan failed")

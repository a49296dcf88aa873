"""Long polls for rollouts to finish (`wait_for_rollouts`): woken by every batch that lands in the view.

A waiter is a future per (caller, rollout); whoever applies events to the view (the committer for the store's
own, the follower for the log's) calls `notify` with them, and a waiter whose rollout reached a final status
is answered. Shutting down or failing answers every waiter at once: they read what finished and return.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from agl_events.events.kinds import FINISHING_KINDS
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.store.errors import StoreUnhealthyError
from agl_events.types import FINISHED_STATUSES, Rollout
from agl_events.views.store_view import StoreView


class Waits:
    """The waiters of one store. `failure()` says why the store stopped serving (None while it serves)."""

    def __init__(self, view: StoreView, failure: Callable[[], BaseException | None]) -> None:
        self._view = view
        self._failure = failure
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._interrupted = False

    def notify(self, events: list[LoggedEvent]) -> None:
        """Wake the waiters of the rollouts these events finished."""
        if not self._waiters:
            return
        for event in events:
            if event.kind in FINISHING_KINDS and event.key in self._waiters:
                rollout = self._view.get(keys.rollout(event.key))
                if rollout is not None and rollout["status"] in FINISHED_STATUSES:
                    for future in self._waiters.pop(event.key):
                        if not future.done():
                            future.set_result(None)

    async def wait(self, rollout_ids: Sequence[str], timeout: float | None) -> list[Rollout]:
        """The finished ones among `rollout_ids` as soon as each finishes, or at the deadline."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[None]] = []
        waiting = (timeout is None or timeout > 0) and not self._interrupted  # else a single check: no waiters
        for rid in dict.fromkeys(rollout_ids) if waiting else ():
            rollout = self._view.get(keys.rollout(rid))
            if rollout is not None and rollout["status"] not in FINISHED_STATUSES:
                future: asyncio.Future[None] = loop.create_future()
                self._waiters.setdefault(rid, []).append(future)
                futures.append(future)
        if futures:
            try:
                await asyncio.wait(futures, timeout=timeout)
            finally:
                for future in futures:
                    future.cancel()
                self._drop_cancelled()
            failure = self._failure()
            if failure is not None:
                raise StoreUnhealthyError(f"the store stopped serving: {failure}") from failure
        finished = []
        for rid in rollout_ids:
            rollout = self._view.get(keys.rollout(rid))
            if rollout is not None and rollout["status"] in FINISHED_STATUSES:
                finished.append(Rollout.model_validate(rollout))
        return finished

    def interrupt(self) -> None:
        """Answer every wait now, and later ones at once."""
        self._interrupted = True
        self.answer_all()

    def answer_all(self) -> None:
        """Wake every waiter (the store failed: they see the failure when they wake)."""
        for futures in self._waiters.values():
            for future in futures:
                if not future.done():
                    future.set_result(None)
        self._waiters.clear()

    def _drop_cancelled(self) -> None:
        for rid in list(self._waiters):
            alive = [f for f in self._waiters[rid] if not f.done()]
            if alive:
                self._waiters[rid] = alive
            else:
                del self._waiters[rid]

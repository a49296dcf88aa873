"""A read-only LightningStore over a view frozen at a cut: "the store as it was when model version 7 was
published", with the same query API (and the same REST routes) as the live store.

Reads answer from the view exactly as the live store's would (same service code); anything that would
append an event is refused with `ReadOnlyStoreError` (HTTP 405 with the reason). Nothing follows the log and
no watchdog runs: the view never moves, so waits for rollouts answer at once with those finished in it.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent, Position
from agl_events.reducers import keys
from agl_events.store.base import UNSET
from agl_events.store.errors import ReadOnlyStoreError
from agl_events.store.follower import Follower
from agl_events.store.service import EventSourcedStore
from agl_events.topics import Topic
from agl_events.types import Attempt, Rollout
from agl_events.views.rocks import RocksKV
from agl_events.views.store_view import StoreView


class _NoLog:
    """The EventLog of a store that appends nothing."""

    def __init__(self, why: str) -> None:
        self.why = why

    def encode(self, new: NewEvent) -> bytes:
        raise ReadOnlyStoreError(self.why)

    def append(self, events: Sequence[EncodedEvent]) -> asyncio.Future[list[LoggedEvent]]:
        raise ReadOnlyStoreError(self.why)

    def close(self) -> None:
        """Nothing to flush."""


class _Frozen:
    """A LogSource that stands still at the view's positions: the view already holds all there is."""

    def __init__(self, positions: dict[Position, int]) -> None:
        self._positions = positions

    def name_of(self, topic: Topic) -> str:
        return topic.value

    def poll(self, max_records: int, timeout: float) -> list[LoggedEvent]:
        return []

    def end_offsets(self, timeout: float = 30.0, topic: str | None = None) -> dict[Position, int]:
        return {pos: end for pos, end in self._positions.items() if topic in (None, pos[0])}

    @property
    def positions(self) -> dict[Position, int]:
        return dict(self._positions)

    def close(self) -> None:
        pass


class ReadOnlyStore(EventSourcedStore):
    """Agent Lightning's store API over a view that does not change. Build it with `ReadOnlyStore.open(folder)`."""

    def __init__(self, view: StoreView, as_of: str, *, clock: Callable[[], float] = time.time) -> None:
        self.as_of = as_of
        self._why = f"this store is read-only: it serves the view {as_of}"
        super().__init__(_NoLog(self._why), view, Follower(_Frozen(view.positions), view), producer_id="read-only",
                         clock=clock)

    _remove: Path | None = None

    @classmethod
    def open(cls, folder: Path, *, remove_on_close: Path | None = None) -> ReadOnlyStore:
        """Serve the view in `folder` (one `agl-events replay rebuild` wrote, or any store's view); closing the
        store deletes `remove_on_close` (a scratch folder the view was rebuilt into). The view is opened
        read-only, so a live store may hold the folder: this one serves it as it was when opened."""
        view = StoreView(RocksKV(folder, read_only=True), track_own=False)
        replay = view.get(keys.REPLAY)
        store = cls(view, f"of {replay['experiment']} up to {replay['cut']['why']}" if replay else f"in {folder}")
        store._remove = remove_on_close
        return store

    async def close(self) -> None:
        await super().close()
        if self._remove is not None:
            shutil.rmtree(self._remove, ignore_errors=True)

    async def start(self) -> int:
        return 0  # nothing to catch up with, nothing to announce

    def _run_background(self) -> None:
        """No follower, no watchdog: the view is frozen at its cut."""

    async def healthcheck(self) -> None:
        self._check_serving()

    async def _decide(self, command: Callable[[Any], Any]) -> Any:
        self._check_serving()
        raise ReadOnlyStoreError(self._why)

    async def update_attempt(self, rollout_id: str, attempt_id: str, status: Any = UNSET, worker_id: Any = UNSET,
                             last_heartbeat_time: Any = UNSET, metadata: Any = UNSET) -> Attempt:
        raise ReadOnlyStoreError(self._why)

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: float | None = None) -> list[Rollout]:
        """The finished ones, now: nothing will finish in a frozen view."""
        return await super().wait_for_rollouts(rollout_ids=rollout_ids, timeout=0)

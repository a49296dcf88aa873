"""A read-only LightningStore over a view frozen at a cut: "the store as it was when model version 7 was
published", with the same query API (and the same REST routes) as the live store.

Built from a backend with no log and no follower (`store.backend`): reads answer from the view exactly as the
live store's would (the same parts), anything that would append an event is refused with `ReadOnlyStoreError`
(HTTP 405 with the reason), no watchdog runs, and waits for rollouts answer at once with those finished in it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from agl_events.reducers import keys
from agl_events.store.backend import Backend
from agl_events.store.service import EventSourcedStore
from agl_events.views.rocks import RocksKV
from agl_events.views.store_view import StoreView


class ReadOnlyStore(EventSourcedStore):
    """Agent Lightning's store API over a view that does not change. Build it with `ReadOnlyStore.open(folder)`."""

    def __init__(self, view: StoreView, as_of: str, *, clock: Callable[[], float] = time.time,
                 after_close: Callable[[], None] = lambda: None) -> None:
        self.as_of = as_of
        super().__init__(Backend(view, "read-only", refusal=f"this store is read-only: it serves the view {as_of}",
                                 after_close=after_close), clock=clock)

    @classmethod
    def open(cls, folder: Path, *, remove_on_close: Path | None = None) -> ReadOnlyStore:
        """Serve the view in `folder` (one `agl-events replay rebuild` wrote, or any store's view); closing the
        store deletes `remove_on_close` (a scratch folder the view was rebuilt into). The view is opened
        read-only, so a live store may hold the folder: this one serves it as it was when opened."""
        view = StoreView(RocksKV(folder, read_only=True), track_own=False)
        replay = view.get(keys.REPLAY)
        as_of = f"of {replay['experiment']} up to {replay['cut']['why']}" if replay else f"in {folder}"
        removed = (lambda: shutil.rmtree(remove_on_close, ignore_errors=True)) if remove_on_close else lambda: None
        return cls(view, as_of, after_close=removed)

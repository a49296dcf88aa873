"""The in-memory backend: a list per topic as the log and a dict as the view. The reference for tests.

Only storage differs from the Kafka backend: the same service decides, and the same follower folds the
log back into the view (confirming the store's own appends, folding anyone else's), so the watchdog,
heartbeats from foreign spans and waits for the fold behave identically on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from agl_events.log.memory import InMemoryLog
from agl_events.store.backend import Backend
from agl_events.store.contract import LightningStoreCapabilities
from agl_events.store.follower import Follower
from agl_events.store.service import EventSourcedStore
from agl_events.views.kv import DictKV
from agl_events.views.store_view import StoreView


class InMemoryLightningStore(EventSourcedStore):
    """Not durable and single-process: for tests and quick experiments. Background work (follower, watchdog)
    starts on first use inside the caller's event loop, so the store can be built outside one, as upstream's.
    `log` is the in-memory log, for tests that play another producer."""

    def __init__(self, scan_debounce_seconds: float = 10.0, *, clock: Callable[[], float] = time.time) -> None:
        self.log = InMemoryLog()
        view = StoreView(DictKV())
        capabilities = LightningStoreCapabilities(thread_safe=False, async_safe=True, zero_copy=False,
                                                  otlp_traces=False)
        super().__init__(Backend(view, "memory-store", self.log, Follower(self.log.reader(), view),
                                 capabilities=capabilities),
                         scan_debounce_seconds=scan_debounce_seconds, clock=clock)

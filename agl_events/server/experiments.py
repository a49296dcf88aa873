"""One store per experiment, created on first use and cached for the life of the app.

Experiments are isolated namespaces (their own topics and views), so each URL prefix `/experiments/<name>`
gets the store `store_for(name)` returns. Creating a store can be slow (it may connect to Kafka and rebuild
views), so concurrent first requests share one creation instead of racing to build two.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from fastapi import HTTPException

from agl_events.config import _EXPERIMENT_RE as EXPERIMENT_RE  # one rule for CLI, topics and URLs
from agl_events.store.contract import LightningStore
from agl_events.views.rocks import ViewUnavailableError

StoreFactory = Callable[[str], Awaitable[LightningStore]]

#: Where every experiment's API lives; the default experiment is also served at the root.
EXPERIMENT_PREFIX = "/experiments/{experiment}"

logger = logging.getLogger("agl_events.server")
#: How long shutdown waits for one experiment's store to close (they close together): its group leaves, its
#: clients flush. A store past it is left as a crash would leave it (the log has every acknowledged event).
CLOSE_TIMEOUT_SECONDS = 4.0


def check_experiment_name(name: str) -> str:
    """Return `name` if it is a legal experiment name, else raise ValueError saying what is allowed."""
    if not EXPERIMENT_RE.match(name):
        raise ValueError(
            f"Invalid experiment name {name!r}: it must start with a letter or digit and contain only "
            "letters, digits, '_' and '-' (at most 100 characters)"
        )
    return name


class ExperimentStores:
    """The cache of experiment stores behind one app."""

    def __init__(self, store_for: StoreFactory, default_experiment: str = "default") -> None:
        self._store_for = store_for
        self.default = check_experiment_name(default_experiment)
        self._stores: dict[str, LightningStore] = {}
        self._creating: dict[str, asyncio.Future[LightningStore]] = {}
        self._closing = False
        #: Called with (experiment, error) when an opened store stops serving (the server exits on it).
        self.on_failure: Callable[[str, BaseException], None] = lambda name, error: None
        #: Called with (experiment, store) when a store is opened, before it answers anything (metrics attach).
        self.open_listeners: list[Callable[[str, LightningStore], None]] = []
        #: Why the view of an experiment could not be opened, until an open succeeds: its /health says so.
        self._open_failures: dict[str, str] = {}

    def resolve_name(self, name: str | None) -> str:
        """The experiment a request addresses (None = the default one); 404 with the rule if illegal."""
        if name is None:
            return self.default
        try:
            return check_experiment_name(name)
        except ValueError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc

    async def get(self, name: str | None) -> LightningStore:
        """The store of experiment `name`, creating it on first use. A failed creation is not cached."""
        name = self.resolve_name(name)
        store = self._stores.get(name)
        if store is not None:
            return store
        if self._closing:
            raise HTTPException(status_code=503, detail="the server is shutting down")
        pending = self._creating.get(name)
        if pending is None:
            pending = asyncio.ensure_future(self._create(name))
            # Mark a failure as seen even if every waiter hung up, so asyncio does not warn about it.
            pending.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._creating[name] = pending
        # shield: a client hanging up must not cancel a creation other requests wait on.
        return await asyncio.shield(pending)

    async def _create(self, name: str) -> LightningStore:
        try:
            logger.info("Opening store of experiment %r", name)
            try:
                store = await self._store_for(name)
            except ViewUnavailableError as exc:
                self._open_failures[name] = f"{type(exc).__name__}: {exc}"
                raise
            self._open_failures.pop(name, None)
            store.add_failure_listener(lambda error: self.on_failure(name, error))
            for listener in self.open_listeners:
                listener(name, store)
            self._stores[name] = store
            return store
        finally:
            self._creating.pop(name, None)

    @property
    def opened(self) -> dict[str, LightningStore]:
        """The stores created so far, by experiment name."""
        return dict(self._stores)

    def failure_of(self, name: str | None) -> str | None:
        """Why the (opened) store of `name` stopped serving, or why its view could not be opened; None while it
        serves or is not opened yet."""
        name = self.resolve_name(name)
        if name not in self._stores:
            return self._open_failures.get(name)
        failure = self._stores[name].failure
        return None if failure is None else f"{type(failure).__name__}: {failure}"

    def interrupt_waits(self) -> None:
        """Answer the long polls of every store now (shutdown must not wait them out)."""
        for store in self._stores.values():
            store.interrupt_waits()

    async def close(self) -> None:
        """Close every store, all at once, each within
        CLOSE_TIMEOUT_SECONDS, then forget them all: a server holding a hundred experiments stops as fast as one.
        Stores still being opened are waited for (as long) and closed too; none is opened from now on."""
        self._closing = True
        if self._creating:
            await asyncio.wait(list(self._creating.values()), timeout=CLOSE_TIMEOUT_SECONDS)
        stores, self._stores = self._stores, {}
        await asyncio.gather(*(_close(name, store) for name, store in stores.items()))


async def _close(name: str, store: LightningStore) -> None:
    try:
        await asyncio.wait_for(store.close(), CLOSE_TIMEOUT_SECONDS)
    except TimeoutError:
        logger.warning("The store of experiment %r did not close within %.0f s; left as it is",
                       name, CLOSE_TIMEOUT_SECONDS)
    except Exception:
        logger.exception("Closing the store of experiment %r failed", name)

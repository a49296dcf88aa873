"""Group commit: commands queue up, one task decides them in order, appends their events in one go.

This is how the store keeps "the owner decides" (dequeue exactly once, gap-free sequence ids) without
paying one Kafka round trip per command: every command in a batch sees the decisions before it, the
batch is appended with one wait for acks=all, and only then is it folded into the view and answered.
If the append fails, no command of the batch took effect and each caller gets the error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from agl_events.log.records import LoggedEvent, NewEvent
from agl_events.store.context import DecisionContext
from agl_events.views.store_view import StoreView

T = TypeVar("T")
Command = Callable[[DecisionContext], Any]


class PartialFailure(Exception):
    """Returned (not raised) by a command whose events up to a failure stand, as upstream keeps them:
    e.g. add_many_spans inserts the groups before the one that fails, then raises."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class EventLog(Protocol):
    """Where events become durable. `append` returns only when every event is acknowledged."""

    async def append(self, events: Sequence[NewEvent]) -> list[LoggedEvent]: ...


class Committer:
    def __init__(self, log: EventLog, view: StoreView, producer_id: str,
                 on_applied: Callable[[list[LoggedEvent]], None], clock: Callable[[], float] = time.time,
                 max_batch: int = 2000) -> None:
        self._log = log
        self._view = view
        self._producer_id = producer_id
        self._on_applied = on_applied
        self._clock = clock
        self._max_batch = max_batch
        self._pending: list[tuple[Command, asyncio.Future[Any]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_now = 0.0

    async def run(self, command: Callable[[DecisionContext], T]) -> T:
        """Decide `command` in turn, and return its result once its events are durable and applied."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="agl-committer")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((command, future))
        self._wakeup.set()
        return await future

    def _now(self) -> float:
        self._last_now = max(self._clock(), self._last_now + 1e-6)
        return self._last_now

    async def _loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch:]
                await self._commit(batch)

    async def _commit(self, batch: list[tuple[Command, asyncio.Future[Any]]]) -> None:
        root = DecisionContext(self._view, self._now(), self._producer_id)
        decided: list[tuple[asyncio.Future[Any], Any]] = []
        for command, future in batch:
            if future.cancelled():
                continue
            child = root.child(self._now())
            try:
                result = command(child)
            except Exception as exc:  # the command's own error: it decided nothing
                future.set_exception(exc)
                continue
            root.absorb(child)
            self._last_now = max(self._last_now, child.now)
            decided.append((future, result))
        try:
            logged = await self._log.append(root.events) if root.events else []
        except Exception as exc:
            for future, _ in decided:
                if not future.done():
                    future.set_exception(exc)
            return
        self._view.apply_own(logged)
        self._on_applied(logged)
        for future, result in decided:
            if future.done():
                continue
            if isinstance(result, PartialFailure):
                future.set_exception(result.error)
            else:
                future.set_result(result)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

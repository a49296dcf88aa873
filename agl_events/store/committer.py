"""Group commit: commands queue up, one task decides them in order, appends their events in one go.

This is how the store keeps "the owner decides" (dequeue exactly once, gap-free sequence ids) without
paying one Kafka round trip per command: every command in a batch sees the decisions before it, the
batch is appended with one wait for acks=all, and only then is it folded into the view and answered.

Batches are pipelined: while one batch waits for its acknowledgement, the next is decided on top of it
(its context reads through the in-flight batch's overlay) and appended behind it, up to `max_in_flight`
batches. They complete strictly in order. If an append fails, whether its acknowledgement fails or the
log refuses it at once, its batch and every batch decided on top of it fail with that error (their events
were decided on changes that did not happen); their callers get the error, the committer goes on with
the next batch, and whatever of them Kafka did take is folded from the log later like any other event.

Each command's events are encoded as soon as it has decided them, so an event the log cannot take (too
large, or off its schema) fails only that command, like an error the command raised itself.

A batch the log took but the view cannot fold leaves the view behind the log for good: its callers and
every later batch fail with `StoreUnhealthyError`, and `on_fold_failure` stops the store (a restarted one
folds those events from the log), instead of the batch's callers and every later command waiting forever.

The committer holds at most `max_queued` commands (waiting, being decided, or awaiting their acks); a
caller finding it full awaits room before its command is taken: a flood of callers is slowed, memory
stays bounded, nothing is refused or dropped. `backpressure` counts those waits.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agl_events.log.backpressure import Backpressure
from agl_events.log.records import EncodedEvent, LoggedEvent
from agl_events.log.sink import EventLog
from agl_events.store.context import DecisionContext
from agl_events.store.errors import StoreUnhealthyError
from agl_events.store.ownership import EVERYWHERE, Placement
from agl_events.views.store_view import StoreView

T = TypeVar("T")
Command = Callable[[DecisionContext], Any]


class PartialFailure(Exception):
    """Returned (not raised) by a command whose events up to a failure stand, as upstream keeps them:
    e.g. add_many_spans inserts the groups before the one that fails, then raises."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class _Batch:
    """A decided batch on its way to the log: its context is the base of the batch decided after it."""

    root: DecisionContext
    decided: list[tuple[asyncio.Future[Any], Any]]
    #: Its place in the order batches complete in.
    number: int
    #: The `event_id`s of its events, to know them when a reader of the log gets them first (`landing`).
    event_ids: list[str]
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Committer:
    def __init__(self, log: EventLog, view: StoreView, producer_id: str,
                 on_applied: Callable[[list[LoggedEvent]], None], clock: Callable[[], float] = time.time,
                 max_batch: int = 2000, max_in_flight: int = 4,
                 on_fold_failure: Callable[[BaseException], None] = lambda error: None,
                 max_queued: int | None = None, placement: Callable[[], Placement] = lambda: EVERYWHERE) -> None:
        """`placement` says, as each batch is decided, where this store may create rollouts (`store.ownership`).
        `max_queued` defaults to a full pipeline plus one batch waiting (`max_batch * (max_in_flight + 1)`):
        more queued commands would add only latency, not throughput."""
        self._log = log
        self._view = view
        self._producer_id = producer_id
        self._on_applied = on_applied
        self._on_fold_failure = on_fold_failure
        self._placement = placement
        self._clock = clock
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._pending: list[tuple[Command, asyncio.Future[Any]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._in_flight: deque[_Batch] = deque()
        self._numbers = itertools.count()
        #: The in-flight batches by the ids of their events: what `landing` looks a read event up in.
        self._landing: dict[str, _Batch] = {}
        self._completions: set[asyncio.Task[None]] = set()
        self._last_now = 0.0
        self.max_queued = max_queued if max_queued is not None else max_batch * (max_in_flight + 1)
        self._room = asyncio.Semaphore(self.max_queued)
        #: Commands taken and not yet answered; never above `max_queued`.
        self.queued = 0
        self.backpressure = Backpressure()

    async def run(self, command: Callable[[DecisionContext], T]) -> T:
        """Decide `command` in turn, and return its result once its events are durable and applied.
        Waits for room first while the committer holds `max_queued` commands."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="agl-committer")
        await self._admit()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(self._leave)  # answered, failed or cancelled by its caller
        self._pending.append((command, future))
        self._wakeup.set()
        return await future

    async def _admit(self) -> None:
        if self._room.locked():
            started = time.perf_counter()
            await self._room.acquire()
            self.backpressure.record(time.perf_counter() - started)
        else:
            await self._room.acquire()
        self.queued += 1

    def _leave(self, _: asyncio.Future[Any]) -> None:
        self.queued -= 1
        self._room.release()

    def _now(self) -> float:
        self._last_now = max(self._clock(), self._last_now + 1e-6)
        return self._last_now

    async def _loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                if len(self._in_flight) >= self._max_in_flight:
                    await asyncio.wait([self._in_flight[0].done])
                    continue
                batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch:]
                self._start(batch)

    def _start(self, commands: list[tuple[Command, asyncio.Future[Any]]]) -> None:
        """Decide `commands` on top of the batches still in flight and queue their events behind them."""
        base = self._in_flight[-1].root if self._in_flight else self._view
        root = DecisionContext(base, self._now(), self._producer_id, self._placement())
        decided: list[tuple[asyncio.Future[Any], Any]] = []
        encoded: list[EncodedEvent] = []
        for command, future in commands:
            if future.cancelled():
                continue
            child = root.child(self._now())
            try:
                result = command(child)
                events = [EncodedEvent(new, self._log.encode(new)) for new in child.events]
            except Exception as exc:  # the command's own error, or an event of it the log cannot take
                future.set_exception(exc)
                continue
            root.absorb(child)
            encoded.extend(events)
            self._last_now = max(self._last_now, child.now)
            decided.append((future, result))
        previous = self._in_flight[-1].done if self._in_flight else None
        batch = _Batch(root, decided, next(self._numbers), [e.new.record["event_id"] for e in encoded])
        self._in_flight.append(batch)
        self._landing.update(dict.fromkeys(batch.event_ids, batch))
        task = asyncio.get_running_loop().create_task(self._complete(batch, previous, self._append(encoded)))
        self._completions.add(task)
        task.add_done_callback(self._completions.discard)

    def _append(self, events: list[EncodedEvent]) -> Awaitable[list[LoggedEvent]] | Exception | None:
        """Queue the batch's events. An error raised at once (librdkafka refusing a record) is kept, to fail
        the batch in its turn as a failed acknowledgement would, instead of ending the committer's loop."""
        if not events:
            return None
        try:
            return self._log.append(events)
        except Exception as exc:
            return exc

    async def _complete(self, batch: _Batch, previous: asyncio.Future[None] | None,
                        appended: Awaitable[list[LoggedEvent]] | Exception | None) -> None:
        """In order: wait for this batch's acks and for the batch before; fold, answer, unlink.

        The acks are awaited even when the batch before fails (this one then fails with its error), so that
        no error of the log is left unretrieved."""
        try:
            logged = await _acknowledged(appended)
            if previous is not None:
                await asyncio.shield(previous)
            if isinstance(logged, Exception):
                raise logged
        except asyncio.CancelledError:
            self._settle(batch, RuntimeError("the store closed before this commit completed"))
            raise
        except Exception as exc:
            self._settle(batch, exc)
            return
        try:
            self._view.apply_own(logged)
            self._on_applied(logged)
        except Exception as exc:
            failure = StoreUnhealthyError(f"the view could not fold events already in the log: {exc!r}")
            failure.__cause__ = exc
            self._on_fold_failure(failure)
            self._settle(batch, failure)
            return
        for future, result in batch.decided:
            if future.done():
                continue
            if isinstance(result, PartialFailure):
                future.set_exception(result.error)
            else:
                future.set_result(result)
        self._settle(batch, None)

    def _settle(self, batch: _Batch, error: Exception | None) -> None:
        """Mark the batch done (failed batches fail their callers) and let the next one read the view."""
        if error is not None:
            for future, _ in batch.decided:
                if not future.done():
                    future.set_exception(error)
        if self._in_flight and self._in_flight[0] is batch:
            self._in_flight.popleft()
        for event_id in batch.event_ids:
            self._landing.pop(event_id, None)
        if self._in_flight:  # its changes are in the view now (or never will be): read the view directly
            self._in_flight[0].root.view = self._view
        if not batch.done.done():
            if error is None:
                batch.done.set_result(None)
            else:
                batch.done.set_exception(error)
                batch.done.exception()  # retrieved: a batch with no successor must not warn

    def landing(self, events: Sequence[LoggedEvent]) -> asyncio.Future[None] | None:
        """Done once the last batch holding one of `events` is settled (folded and answered, or failed); None
        when none of them is in flight.

        Kafka can hand a reader an event before its writer hears the acknowledgement, and a batch's events lie
        in several partitions, read independently: a reader folding them as they come would show half a batch
        (a rollout succeeded, its attempt still running). The store's follower waits for this instead, and
        then finds them folded (`StoreView.apply_own`)."""
        last: _Batch | None = None
        if self._landing:
            for event in events:
                batch = self._landing.get(event.record.get("event_id", ""))
                if batch is not None and (last is None or batch.number > last.number):
                    last = batch
        return None if last is None else last.done

    async def drain(self) -> None:
        """Wait until every command taken so far is answered: their events durable, or failed. A store handing
        partitions to another drains first, so the new owner's catch-up finds everything it decided."""
        while self._pending or self._in_flight:
            if self._in_flight:
                await asyncio.wait([self._in_flight[-1].done])
            else:
                await asyncio.sleep(0.001)

    async def close(self) -> None:
        tasks = [t for t in (self._task, *self._completions) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None


async def _acknowledged(appended: Awaitable[list[LoggedEvent]] | Exception | None) -> list[LoggedEvent] | Exception:
    """The events as logged, or the error the log gave for them."""
    if appended is None:
        return []
    if isinstance(appended, Exception):
        return appended
    try:
        return await appended
    except Exception as exc:
        return exc

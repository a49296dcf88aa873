"""Recovery and following: fold the log into the store's view, from where the view left off, for as long as
the store lives.

Backend-neutral: the follower reads any `log.source.LogSource` (Kafka's `EventReader`, the in-memory log's
reader) and folds each batch, with how far it was read, through `StoreView.fold` as a rebuild does, so
the in-memory reference and the Kafka store fold, confirm their own appends and see foreign events (a
runner's spans) the same way. What folded events *mean* (waking waiters, heartbeats) is the service's
business: it gets every folded batch through `on_folded`.

A fold that raises (a reducer bug, a RocksDB error) is not retried here: the same event would fail again, and
a view that skipped it would hold less than the log. The follower stops, logs why, fails everyone waiting for
the fold with `FollowerFailed`, and reports through `on_failure`; the service turns unhealthy and the server
exits, so a supervisor restarts it and the new process catches up from the view's own stored positions.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping

from agl_events.log.records import LoggedEvent, Position, ReadBatch, reached
from agl_events.log.source import LogSource, read_batch
from agl_events.store.errors import FollowerFailed
from agl_events.store.lane import Lane, ask
from agl_events.topics import Topic
from agl_events.views.store_view import StoreView

log = logging.getLogger(__name__)

#: Records decoded and folded per step. Bounded memory while rebuilding a long history, and no fold rate lost:
#: with the consumer's prefetch capped too, a store rebuilding 1M spans stays near 300 MB.
POLL_RECORDS = 1000
#: How long one poll gathers records while they flow: a poll waits its whole timeout unless POLL_RECORDS come,
#: so this bounds how long a fresh record waits before it is folded (every finishing attempt waits for that).
BUSY_POLL_SECONDS = 0.01
#: While the log is quiet, each empty poll doubles the timeout up to this: an idle store wakes 4 times a
#: second, not 100 (0.6% of a core instead of 4%), and the first record after a quiet spell waits at most
#: this long. It also bounds how long `stop` waits for the poll thread.
IDLE_POLL_SECONDS = 0.25


#: Seconds a wait for caller-given offsets goes before it checks them against the end of the log.
END_CHECK_SECONDS = 1.0


class Follower:
    """Folds `source` into `view`: `catch_up` before the store serves, then `start` to keep following."""

    def __init__(self, source: LogSource, view: StoreView) -> None:
        self.source = source
        self.view = view
        #: The source's polls run on a thread of their own (`store.lane`), never on the loop's shared executor.
        self._polls = Lane("agl-follow-poll")
        self.on_folded: Callable[[list[LoggedEvent]], None] = lambda events: None
        self.on_failure: Callable[[BaseException], None] = lambda error: None
        #: What to wait for before folding a batch holding the store's own events still on their way to the view
        #: (`Committer.landing`): the view then shows a commit whole or not at all.
        self.landing: Callable[[list[LoggedEvent]], asyncio.Future[None] | None] = lambda events: None
        self._stopped: asyncio.Future[None] | None = None
        #: How far the view has folded each partition (its stored positions): not the source's live positions,
        #: which move on while a batch is still on its way to the view.
        self._folded: dict[Position, int] = view.positions
        self._progress = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.failure: BaseException | None = None

    async def catch_up(self) -> int:
        """Fold everything in the log up to its current end; returns how many events were new to the view."""
        targets = await ask(self.source.end_offsets)
        applied = 0
        while not reached(self._folded, targets):
            applied += self.view.fold(await self._read(IDLE_POLL_SECONDS))
            self._folded = self.view.positions
        return applied

    async def _read(self, timeout: float) -> ReadBatch:
        return await self._polls.run(functools.partial(read_batch, self.source, POLL_RECORDS, timeout))

    async def reassign(self, change: Callable[[], None]) -> None:
        """Run `change` (partitions of the source added or removed: a store group moved rollouts) on the poll
        thread, between two polls."""
        await self._polls.run(change)

    def start(self) -> None:
        if self._task is None:
            self._stopped = asyncio.get_running_loop().create_future()
            self._task = asyncio.get_running_loop().create_task(self._follow(self._stopped), name="agl-follow")

    async def _follow(self, stopped: asyncio.Future[None]) -> None:
        """Fold what others append (and confirm our own appends) as it arrives, until `stop` (`stopped`)."""
        try:
            timeout = BUSY_POLL_SECONDS
            while not self._stopping:
                batch = await self._read(timeout)
                timeout = BUSY_POLL_SECONDS if batch.events else min(2 * timeout, IDLE_POLL_SECONDS)
                landing = self.landing(batch.events)
                if landing is not None:  # settled either way: a failed commit's events in the log are folded here
                    await asyncio.wait([landing, stopped], return_when=asyncio.FIRST_COMPLETED)
                    if self._stopping:
                        break  # unfolded and its positions not stored: the next start reads it again
                self.view.fold(batch)
                if batch.events:
                    self.on_folded(batch.events)
                if self.view.positions != self._folded:
                    self._folded = self.view.positions
                    self._wake()
        except Exception as exc:
            log.exception("the view stopped following the log: %s", exc)
            self.failure = exc
            self._wake()
            self.on_failure(exc)

    def _wake(self) -> None:
        self._progress.set()
        self._progress.clear()

    async def wait_folded(self, topic: Topic, ends: Mapping[int, int] | None = None) -> None:
        """Wait until the view holds `topic` up to `ends` (partition -> offset past the last record wanted),
        or, without `ends`, everything acknowledged in `topic` before this call (asks the log where it ends).

        Caller-given `ends` not reached within END_CHECK_SECONDS are checked against the log once: a
        partition it lacks or an offset past its end (which no acknowledged record can give) is a
        ValueError, where the wait would otherwise last forever."""
        name = self.source.name_of(topic)
        if ends is None:
            targets = await ask(functools.partial(self.source.end_offsets, 30.0, name))
        else:
            targets = {(name, partition): end for partition, end in ends.items()}
        checked = ends is None
        while not reached(self._folded, targets):
            if self.failure is not None:
                raise FollowerFailed(f"the view stopped following the log: {self.failure}") from self.failure
            if self._task is None or self._task.done():
                raise FollowerFailed("the view is not following the log (store not started, or closed)")
            try:
                await asyncio.wait_for(self._progress.wait(), None if checked else END_CHECK_SECONDS)
            except TimeoutError:
                checked = True
                await self._check_within_log(name, targets)

    async def _check_within_log(self, name: str, targets: Mapping[Position, int]) -> None:
        log_ends = await ask(functools.partial(self.source.end_offsets, 30.0, name))
        beyond = {partition: end for (_, partition), end in targets.items()
                  if end > log_ends.get((name, partition), 0)}
        if beyond:
            known = {partition: end for (_, partition), end in sorted(log_ends.items())}
            raise ValueError(f"offsets past the end of {name} (partition -> offset): {beyond}; "
                             f"its partitions end at {known}")

    async def stop(self) -> None:
        """Let the poll in progress return (at most IDLE_POLL_SECONDS) instead of cancelling it: the source
        must not be closed while a thread still reads from it."""
        self._stopping = True
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        self._polls.close()
        self._wake()

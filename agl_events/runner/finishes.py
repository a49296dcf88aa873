"""A runner's rollout ends, reported to the store in batches: one call for whatever finished meanwhile.

A runner running several rollouts at once finishes them close together; one HTTP call (and one store
command per attempt, all in one committer batch) for all that finished while the previous call was on
its way costs the store and the runner a fraction of a call each. No added wait: a finish alone is sent
at once.
"""

from __future__ import annotations

import asyncio

from agl_events.server.client import StoreClient
from agl_events.types import AttemptFinish, FinishOutcome


class FinishBatcher:
    """`finish` queues one attempt's end and returns its outcome once the call carrying it answered."""

    def __init__(self, client: StoreClient) -> None:
        self._client = client
        self._pending: list[tuple[AttemptFinish, asyncio.Future[FinishOutcome]]] = []
        self._sending: asyncio.Task[None] | None = None
        #: Calls made and attempts they carried (the runner's heartbeat stats show the batching).
        self.calls = 0
        self.finished = 0

    async def finish(self, finish: AttemptFinish) -> FinishOutcome:
        """The store's outcome for this attempt; raises what the call raised (StoreUnavailableError...)."""
        future: asyncio.Future[FinishOutcome] = asyncio.get_running_loop().create_future()
        self._pending.append((finish, future))
        if self._sending is None or self._sending.done():
            self._sending = asyncio.create_task(self._send(), name="agl-finishes")
        return await future

    async def _send(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                outcomes = await self._client.finish_many([finish for finish, _ in batch])
            except Exception as exc:  # each caller decides: retry (store restarting) or give up
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            self.calls += 1
            self.finished += len(batch)
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if not future.done():
                    future.set_result(outcome)

"""Commands about rollouts, each decided by the store owning the rollout's partition.

For each command: `here` decides it locally (`store.writes`), `there` forwards it to its owner through the
route table (`store.group`); the router (`store.routing`) picks, splits batches by owner and retries where
ownership moved. Outside a store group every command is decided here.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from agl_events.events.task_request import TaskRequest
from agl_events.store import route_table as routes
from agl_events.store.group import Group
from agl_events.store.peers import PeerUnavailableError
from agl_events.store.writes import Writes
from agl_events.types import (
    UNSET,
    Attempt,
    AttemptedRollout,
    AttemptFinish,
    Claim,
    EnqueueRolloutRequest,
    FinishOutcome,
    Rollout,
    Span,
)

log = logging.getLogger(__name__)


class Routed:
    """The routed commands of one store, over its `writes` and its `group` part."""

    def __init__(self, writes: Writes, group: Group) -> None:
        self._writes = writes
        self._group = group
        self._router = group.router

    async def _enqueue_there(self, owner: str, requests: Sequence[EnqueueRolloutRequest]) -> list[Rollout]:
        return [Rollout.model_validate(r)
                for r in await self._group.forward(owner, routes.ENQUEUE, {"rollouts": requests})]

    # -- new rollouts: created where a partition is owned ---------------------------------------------------
    async def start_rollout(self, input: Any, mode: Any, resources_id: str | None, config: Any,
                            metadata: dict[str, Any] | None, worker_id: str | None) -> AttemptedRollout:
        async def there(owner: str) -> AttemptedRollout:
            return AttemptedRollout.model_validate(await self._group.forward(owner, routes.START_ROLLOUT, {
                "input": input, "mode": mode, "resources_id": resources_id, "config": config,
                "metadata": metadata, "worker_id": worker_id}))

        return await self._router.create(
            lambda: self._writes.start_rollout(input, mode, resources_id, config, metadata, worker_id), there)

    async def enqueue_rollout(self, input: Any, mode: Any, resources_id: str | None, config: Any,
                              metadata: dict[str, Any] | None) -> Rollout:
        async def there(owner: str) -> Rollout:
            request = EnqueueRolloutRequest(input=input, mode=mode, resources_id=resources_id, config=config,
                                            metadata=metadata)
            return (await self._enqueue_there(owner, [request]))[0]

        return await self._router.create(
            lambda: self._writes.enqueue_rollout(input, mode, resources_id, config, metadata), there)

    async def enqueue_many(self, requests: Sequence[EnqueueRolloutRequest]) -> list[Rollout]:
        return await self._router.create(lambda: self._writes.enqueue_many(requests),
                                         lambda owner: self._enqueue_there(owner, requests))

    async def ingest_task(self, key: str, request: TaskRequest) -> tuple[str, bool]:
        """Waits until this store owns a partition to create the rollout in (ingesters create only here)."""
        await self._router.owning()
        return await self._writes.ingest_task(key, request)

    async def dequeue(self, limit: int, worker_id: str | None) -> list[AttemptedRollout]:
        found = await self._writes.dequeue(limit, worker_id)
        for other in self._router.others():  # a store group: the other owners' queues, once ours is empty
            if len(found) >= limit:
                break
            try:
                found += [AttemptedRollout.model_validate(r) for r in await self._group.forward(
                    other, routes.DEQUEUE, {"limit": limit - len(found), "worker_id": worker_id})]
            except PeerUnavailableError as exc:  # its queue is its owner's next: nothing dequeued there now
                log.warning("dequeue skipped store %s: %s", other, exc)
                self._router.refresh()
        return found

    # -- one rollout ------------------------------------------------------------------------------------------
    async def update_rollout(self, rollout_id: str, given: dict[str, Any]) -> Rollout:
        async def there(owner: str) -> Rollout:
            return Rollout.model_validate(await self._group.forward(
                owner, routes.UPDATE_ROLLOUT, _given(given), rollout_id=rollout_id))

        return await self._router.run(rollout_id, lambda: self._writes.update_rollout(rollout_id, **given), there)

    async def start_attempt(self, rollout_id: str, worker_id: str | None) -> AttemptedRollout:
        async def there(owner: str) -> AttemptedRollout:
            return AttemptedRollout.model_validate(await self._group.forward(
                owner, routes.START_ATTEMPT, {"worker_id": worker_id}, rollout_id=rollout_id))

        return await self._router.run(rollout_id, lambda: self._writes.start_attempt(rollout_id, worker_id), there)

    async def update_attempt(self, rollout_id: str, attempt_id: str, given: dict[str, Any]) -> Attempt:
        async def there(owner: str) -> Attempt:
            return Attempt.model_validate(await self._group.forward(
                owner, routes.UPDATE_ATTEMPT, _given(given), rollout_id=rollout_id, attempt_id=attempt_id))

        return await self._router.run(
            rollout_id, lambda: self._writes.update_attempt(rollout_id, attempt_id, **given), there)

    async def finish_attempt(self, rollout_id: str, attempt_id: str, status: str,
                             spans_through: Mapping[int, int]) -> Attempt:
        async def there(owner: str) -> Attempt:
            return Attempt.model_validate(await self._group.forward(
                owner, routes.FINISH_ATTEMPT, {"status": status, "spans_through": spans_through},
                rollout_id=rollout_id, attempt_id=attempt_id))

        return await self._router.run(
            rollout_id, lambda: self._writes.finish_one(rollout_id, attempt_id, status, spans_through), there)

    # -- batches over rollouts of any partitions -----------------------------------------------------------------
    async def claim(self, rollout_ids: Sequence[str], worker_id: str | None) -> list[Claim | None]:
        async def there(owner: str, indices: list[int]) -> list[Claim | None]:
            answers = await self._group.forward(owner, routes.CLAIMS, {
                "rollout_ids": [rollout_ids[i] for i in indices], "worker_id": worker_id})
            return [Claim.model_validate(a) if a["rollout"] is not None else None for a in answers]

        return await self._router.run_many(
            rollout_ids, lambda indices: self._writes.claim([rollout_ids[i] for i in indices], worker_id), there)

    async def finish(self, finishes: Sequence[AttemptFinish]) -> list[FinishOutcome]:
        async def there(owner: str, indices: list[int]) -> list[FinishOutcome]:
            answers = await self._group.forward(owner, routes.FINISH_ATTEMPTS,
                                                {"finishes": [finishes[i] for i in indices]})
            return [FinishOutcome.model_validate(a) for a in answers]

        return await self._router.run_many([f.rollout_id for f in finishes],
                                           lambda indices: self._writes.finish([finishes[i] for i in indices]), there)

    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        """The spans inserted (duplicates skipped), each decided by its rollout's owner."""
        if not spans:
            return []

        def here(indices: list[int]) -> Awaitable[list[bool]]:
            return self._writes.add_spans([spans[i].model_dump(mode="json") for i in indices])

        async def there(owner: str, indices: list[int]) -> list[bool]:
            return [await self._group.forward(owner, routes.ADD_SPAN, spans[i]) is not None for i in indices]

        added = await self._router.run_many([s.rollout_id for s in spans], here, there)
        return [span for span, ok in zip(spans, added, strict=True) if ok]

    async def sequence_ids(self, pairs: list[tuple[str, str]]) -> list[int]:
        if not pairs:
            return []

        async def there(owner: str, indices: list[int]) -> list[int]:
            """One forward per distinct pair, for as many ids as it occurs (a tracer's block is one call)."""
            wanted = Counter(pairs[i] for i in indices)
            following = {pair: (await self._group.forward(owner, routes.NEXT_SEQUENCE_ID, {
                "rollout_id": pair[0], "attempt_id": pair[1], "count": count}))["sequence_id"]
                for pair, count in wanted.items()}
            issued: list[int] = []
            for i in indices:
                issued.append(following[pairs[i]])
                following[pairs[i]] += 1
            return issued

        return await self._router.run_many([rid for rid, _ in pairs],
                                           lambda indices: self._writes.sequence_ids([pairs[i] for i in indices]),
                                           there)


def _given(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields a caller gave (UNSET ones are not sent: the owner must not apply them)."""
    return {k: v for k, v in fields.items() if v is not UNSET}

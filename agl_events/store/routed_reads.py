"""Reads in a store group: a read about one rollout goes to its owner, a query over all rollouts to every member.

The owner of a rollout's partition is the store whose view is sure to hold what was decided for it (it folds
its own decisions before answering them), so a read about a rollout is routed like a command about it
(`store.routing`), and a caller reads its own writes through any store. A query over all rollouts fans out:
each member answers for the partitions this store names (`peers.PARTITIONS_HEADER`; a member that no longer
owns them all refuses, and the query is asked again once the group said who owns what), with the first
offset+limit rollouts of its share sorted as asked; the pages are merged and cut as one store would
(`queries.merge`), and the totals add up. Outside a group every read is the view's (`store.reads`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence
from typing import Any

from agl_events.store import queries as q
from agl_events.store import route_table as routes
from agl_events.store.errors import NoOwnerError, NotOwnerError
from agl_events.store.peers import ASKED_PARTITIONS, FORWARDED, PeerStores, PeerUnavailableError
from agl_events.store.reads import PER_ROLLOUT, Reads, rollout_base_order, rollout_order
from agl_events.store.routing import RETRY_SECONDS, ROUTE_WAIT_SECONDS, Router
from agl_events.store.waits import Waits
from agl_events.topics import partition_of
from agl_events.types import Attempt, AttemptedRollout, PaginatedResult, Rollout, Span

#: A wait for another owner's rollouts goes there in slices of this many seconds (the caller's timeout may be
#: longer than a forwarded call may take, or None).
FORWARDED_WAIT_SECONDS = 20.0


def rollout_of(found: dict[str, Any]) -> Rollout | AttemptedRollout:
    """A rollout as JSON, with its latest attempt where it has one (what the REST API answers)."""
    return AttemptedRollout.model_validate(found) if found.get("attempt") else Rollout.model_validate(found)


def in_partitions(partitions: frozenset[int], count: int) -> q.Condition:
    return lambda rollout: partition_of(rollout["rollout_id"], count) in partitions


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _in_order(asked: list[str], finished: list[Rollout]) -> list[Rollout | None]:
    by_id = {r.rollout_id: r for r in finished}
    return [by_id.get(rid) for rid in asked]


class RoutedReads:
    """The reads of one store over its view (`reads`) and, in a group, the other members."""

    def __init__(self, reads: Reads, waits: Waits, router: Router) -> None:
        self._reads = reads
        self._waits = waits
        self._router = router

    @property
    def _peers(self) -> PeerStores:
        assert self._router.peers is not None, "a store group has peers"
        return self._router.peers

    # -- one rollout: its owner answers -------------------------------------------------------------------------
    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        async def here() -> Rollout | AttemptedRollout | None:
            return self._reads.get_rollout_by_id(rollout_id)

        async def there(owner: str) -> Rollout | AttemptedRollout | None:
            found = await self._peers.call(owner, routes.GET_ROLLOUT.method,
                                           routes.GET_ROLLOUT.url(rollout_id=rollout_id))
            return None if found is None else rollout_of(found)

        return await self._router.run(rollout_id, here, there)

    async def query_attempts(self, rollout_id: str, *, sort_by: str | None, sort_order: str, limit: int,
                             offset: int) -> PaginatedResult[Attempt]:
        async def here() -> PaginatedResult[Attempt]:
            return self._reads.query_attempts(rollout_id, sort_by=sort_by, sort_order=sort_order, limit=limit,
                                              offset=offset)

        async def there(owner: str) -> PaginatedResult[Attempt]:
            page = await self._peers.call(owner, routes.SEARCH_ATTEMPTS.method,
                                          routes.SEARCH_ATTEMPTS.url(rollout_id=rollout_id),
                                          {"sort_by": sort_by, "sort_order": sort_order, "limit": limit,
                                           "offset": offset})
            return PaginatedResult[Attempt].model_validate(page)

        return await self._router.run(rollout_id, here, there)

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        async def here() -> Attempt | None:
            return self._reads.get_latest_attempt(rollout_id)

        async def there(owner: str) -> Attempt | None:
            found = await self._peers.call(owner, routes.LATEST_ATTEMPT.method,
                                           routes.LATEST_ATTEMPT.url(rollout_id=rollout_id))
            return None if found is None else Attempt.model_validate(found)

        return await self._router.run(rollout_id, here, there)

    async def query_spans(self, rollout_id: str, attempt_id: str | None, *, equal: dict[str, str | None],
                          containing: dict[str, str | None], filter_logic: str, limit: int, offset: int,
                          sort_by: str | None, sort_order: str) -> PaginatedResult[Span]:
        async def here() -> PaginatedResult[Span]:
            return self._reads.query_spans(rollout_id, attempt_id, equal=equal, containing=containing,
                                           filter_logic=filter_logic, limit=limit, offset=offset, sort_by=sort_by,
                                           sort_order=sort_order)

        async def there(owner: str) -> PaginatedResult[Span]:
            page = await self._peers.call(owner, routes.SEARCH_SPANS.method, routes.SEARCH_SPANS.path, {
                "rollout_id": rollout_id, "attempt_id": attempt_id, **equal,
                **{f"{field}_contains": value for field, value in containing.items()},
                "filter_logic": filter_logic, "limit": limit, "offset": offset, "sort_by": sort_by,
                "sort_order": sort_order})
            return PaginatedResult[Span].model_validate(page)

        return await self._router.run(rollout_id, here, there)

    async def wait_for_rollouts(self, rollout_ids: Sequence[str], timeout: float | None) -> list[Rollout]:
        """Each owner waits for its rollouts (only its view sees them finish); the finished ones in the order
        asked. A wait here whose partition is handed over meanwhile (this view stops folding it) goes on at the
        new owner."""
        if self._router.ownership is None:
            return await self._waits.wait(rollout_ids, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        finished: dict[str, Rollout] = {}
        waiting = list(dict.fromkeys(rollout_ids))
        while waiting:
            handed_over: list[str] = []
            answers = await self._router.run_many(
                waiting, functools.partial(self._wait_here, waiting, deadline, handed_over),
                functools.partial(self._wait_there, waiting, deadline))
            finished.update((r.rollout_id, r) for r in answers if r is not None)
            waiting = [rid for rid in handed_over if rid not in finished]
        return [finished[rid] for rid in rollout_ids if rid in finished]

    async def _wait_here(self, rollout_ids: list[str], deadline: float | None, handed_over: list[str],
                         indices: list[int]) -> list[Rollout | None]:
        """Wait in this view for those of `rollout_ids` at `indices` until they finish or the deadline passes, or
        until this store hands one's partition over: then they are all added to `handed_over`, to be asked of
        their owners now (who answer at once for those already finished)."""
        asked = [rollout_ids[i] for i in indices]
        waited = asyncio.ensure_future(self._waits.wait(asked, None if deadline is None else _left(deadline)))
        moved = asyncio.ensure_future(self._handed_over(asked))
        try:
            await asyncio.wait({waited, moved}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            moved.cancel()
            if not waited.done():
                waited.cancel()
        if waited.done():
            return _in_order(asked, waited.result())
        handed_over.extend(asked)
        return [None] * len(asked)

    async def _handed_over(self, rollout_ids: Sequence[str]) -> None:
        """Returns once this store no longer owns one of `rollout_ids`."""
        ownership = self._router.ownership
        assert ownership is not None
        while True:
            changed = ownership.changed
            if not all(ownership.placement.owns(rid) for rid in rollout_ids):
                return
            await changed.wait()

    async def _wait_there(self, rollout_ids: list[str], deadline: float | None, owner: str, indices: list[int]
                          ) -> list[Rollout | None]:
        """Those of `rollout_ids` at `indices` as `owner` waits for them, in slices, each well within a forwarded
        call's HTTP timeout."""
        asked = [rollout_ids[i] for i in indices]
        while True:
            left = None if deadline is None else _left(deadline)  # None: until they finish
            found = await self._peers.call(owner, routes.WAIT_ROLLOUTS.method, routes.WAIT_ROLLOUTS.path, {
                "rollout_ids": asked, "timeout": FORWARDED_WAIT_SECONDS if left is None else
                min(left, FORWARDED_WAIT_SECONDS)})
            done = _in_order(asked, [Rollout.model_validate(r) for r in found])
            if None not in done or (left is not None and left <= FORWARDED_WAIT_SECONDS):
                return done

    async def task_rollouts(self, task_keys: Sequence[str]) -> dict[str, str]:
        """Which task-request keys became rollouts: a key's rollout is in any partition (its ingester's), so
        every member is asked (each answers from its view; the owners' views hold every key of theirs)."""
        found = self._reads.task_rollouts(task_keys)
        if self._router.ownership is None or FORWARDED.get() or not task_keys:
            return found
        deadline = time.monotonic() + ROUTE_WAIT_SECONDS
        while True:
            others = [url for url in await self._router.shares(deadline) if url is not None]
            try:
                answers = await asyncio.gather(*(self._peers.call(
                    url, routes.FIND_TASK_REQUESTS.method, routes.FIND_TASK_REQUESTS.path, {"keys": task_keys})
                    for url in others))
                return {key: rid for answer in [found, *answers] for key, rid in answer.items()}
            except PeerUnavailableError as exc:
                self._router.refresh()
                if time.monotonic() > deadline:
                    raise NoOwnerError(f"the store group did not say which task requests it ingested within "
                                       f"{ROUTE_WAIT_SECONDS:.0f} s (last: {exc})") from exc
                await asyncio.sleep(RETRY_SECONDS)

    # -- all rollouts: every member answers for its partitions --------------------------------------------------
    async def counts(self) -> tuple[dict[str, int], list[int]]:
        """Totals by entity, and the rollouts partitions nobody counted. In a group the totals are the group's:
        each owner counts the partitions it owns now (its view also holds those it once owned, stale), the
        global entities are this view's. It does not wait for the group (runners read the owner map from the
        same answer, most of all while partitions move): a partition without an owner right now (being taken
        over), or whose owner did not answer, is left out and listed."""
        ownership = self._router.ownership
        if ownership is None:
            return self._reads.counts(), []
        asked = ASKED_PARTITIONS.get()
        if asked is not None:  # our share of a count another member fanned out
            if not asked <= ownership.owned:
                raise NotOwnerError(f"partitions {sorted(asked - ownership.owned)} are not owned here")
            return {**self._reads.counts(), **self._reads.counts_in(asked, ownership.partitions)}, []
        shares: dict[str | None, set[int]] = {}
        for partition in range(ownership.partitions):
            shares.setdefault(ownership.owner_of(partition), set()).add(partition)
        uncounted = shares.pop(None, set())
        mine = frozenset(shares.pop(ownership.own_url, set()))
        totals = {**self._reads.counts(), **self._reads.counts_in(mine, ownership.partitions)}
        answers = await asyncio.gather(*(self._peers.call(url, routes.STATISTICS.method, routes.STATISTICS.path,
                                                          partitions=partitions) for url, partitions in
                                         shares.items()), return_exceptions=True)
        for partitions, answer in zip(shares.values(), answers, strict=True):
            if isinstance(answer, NotOwnerError | PeerUnavailableError):
                uncounted |= partitions
            elif isinstance(answer, BaseException):
                raise answer
            else:
                for entity in PER_ROLLOUT:
                    totals[entity] += answer[f"total_{entity}"]
        return totals, sorted(uncounted)

    async def query_rollouts(self, *, status_in: Sequence[str] | None, rollout_id_in: Sequence[str] | None,
                             rollout_id_contains: str | None, filter_logic: str, sort_by: str | None,
                             sort_order: str, limit: int, offset: int, status: Sequence[str] | None,
                             rollout_ids: Sequence[str] | None) -> PaginatedResult[Rollout | AttemptedRollout]:
        ownership = self._router.ownership
        asked = ASKED_PARTITIONS.get()
        query: dict[str, Any] = dict(status_in=status_in, rollout_id_in=rollout_id_in,
                                     rollout_id_contains=rollout_id_contains, filter_logic=filter_logic,
                                     sort_by=sort_by, sort_order=sort_order, limit=limit, offset=offset)
        if ownership is None:
            return self._reads.query_rollouts(**query, status=status, rollout_ids=rollout_ids)
        if asked is not None:  # our share of a query another member fanned out
            if not asked <= ownership.owned:
                raise NotOwnerError(f"partitions {sorted(asked - ownership.owned)} are not owned here")
            return self._reads.query_rollouts(**query, status=status, rollout_ids=rollout_ids,
                                              among=in_partitions(asked, ownership.partitions))
        query.update(status_in=status_in if status_in is not None else status,
                     rollout_id_in=rollout_id_in if rollout_id_in is not None else rollout_ids)
        pages = await self._fan_out(query, ownership.partitions)
        merged = q.merge((items for items, _ in pages), Rollout, rollout_base_order(query["rollout_id_in"],
                                                                                   filter_logic),
                         *rollout_order(sort_by, sort_order), limit, offset)
        return PaginatedResult(items=[rollout_of(r) for r in merged], limit=limit, offset=offset,
                               total=sum(total for _, total in pages))

    async def _fan_out(self, query: dict[str, Any], count: int) -> list[tuple[list[dict[str, Any]], int]]:
        """Each owner's share of `query` as (its first offset+limit rollouts as JSON, its total); asked again
        wherever a share's owner changed on the way: a member that refused its share (421) once the group lists
        another owner for it, or after a pause while it still lists that member (`Router.moved`), one that could
        not be reached after a shorter pause, and shares of this store's own partitions moved meanwhile at once."""
        share_limit, share_offset = q.part_window(query["limit"], query["offset"])
        share = {**query, "limit": share_limit, "offset": share_offset}
        deadline = time.monotonic() + ROUTE_WAIT_SECONDS

        async def ask(owner: str | None, partitions: frozenset[int]) -> tuple[list[dict[str, Any]], int]:
            if owner is None:
                assert self._router.ownership is not None
                if not partitions <= self._router.ownership.owned:
                    raise NotOwnerError(f"partitions {sorted(partitions)} moved")
                page = self._reads.query_rollouts(**share, status=None, rollout_ids=None,
                                                  among=in_partitions(partitions, count))
                return [r.model_dump(mode="json") for r in page.items], page.total
            answer = await self._peers.call(owner, routes.SEARCH_ROLLOUTS.method, routes.SEARCH_ROLLOUTS.path,
                                            share, partitions=partitions)
            return answer["items"], answer["total"]

        while True:
            shares = await self._router.shares(deadline)
            answers = await asyncio.gather(*(ask(owner, ps) for owner, ps in shares.items()), return_exceptions=True)
            failed = {owner: answer for owner, answer in zip(shares, answers, strict=True)
                      if isinstance(answer, BaseException)}
            if not failed:
                return [answer for answer in answers if not isinstance(answer, BaseException)]
            for error in failed.values():
                if not isinstance(error, NotOwnerError | PeerUnavailableError):
                    raise error
            refused = {owner for owner, error in failed.items() if owner is not None and
                       isinstance(error, NotOwnerError)}
            await asyncio.gather(*(self._router.moved(owner, shares[owner], deadline) for owner in refused))
            if len(refused) < len(failed):
                self._router.refresh()
                if time.monotonic() > deadline:
                    raise NoOwnerError(f"the store group did not answer a query over all rollouts within "
                                       f"{ROUTE_WAIT_SECONDS:.0f} s (last: {next(iter(failed.values()))})")
                if any(isinstance(error, PeerUnavailableError) for error in failed.values()):
                    await asyncio.sleep(RETRY_SECONDS)

"""The event-sourced LightningStore: commands decided by the committer, queries answered from the view.

Backends (in-memory, Kafka) supply only the log, the view storage and a source the follower reads the log
back from; all behaviour lives here: decisions, the watchdog, heartbeats inferred from spans others append,
waiting for the fold before a finish, long-poll waits, and what happens when the view stops following.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from agl_events.events.kinds import FINISHING_KINDS, Kind
from agl_events.events.task_request import TaskRequest
from agl_events.log.backpressure import BackpressureStats
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.store import queries as q
from agl_events.store.base import UNSET, LightningStoreCapabilities
from agl_events.store.commands import attempts as attempt_cmds
from agl_events.store.commands import candidates as candidate_cmds
from agl_events.store.commands import dispatch as dispatch_cmds
from agl_events.store.commands import ingest as ingest_cmds
from agl_events.store.commands import resources as resource_cmds
from agl_events.store.commands import rollouts as rollout_cmds
from agl_events.store.commands import spans as span_cmds
from agl_events.store.commands import tasks as task_cmds
from agl_events.store.commands import workers as worker_cmds
from agl_events.store.committer import Committer, EventLog
from agl_events.store.context import DecisionContext
from agl_events.store.errors import NotOwnerError, StoreUnhealthyError
from agl_events.store.follower import Follower
from agl_events.store.peers import PeerUnavailableError
from agl_events.store.routing import Router, owned
from agl_events.topics import Topic
from agl_events.types import (
    FINISHED_STATUSES,
    Attempt,
    AttemptedRollout,
    AttemptFinish,
    Claim,
    EnqueueRolloutRequest,
    FinishOutcome,
    NamedResources,
    PaginatedResult,
    PromptCandidate,
    PromptCandidateStep,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Span,
    Worker,
)
from agl_events.views.store_view import StoreView

log = logging.getLogger(__name__)

#: What a command another store decided may have written: waited for before answering a forwarded call.
FORWARD_FOLDS = (Topic.ROLLOUTS, Topic.ATTEMPTS, Topic.SPANS)
#: How stale a running attempt's heartbeat may get while its runner streams spans (far below any sensible
#: unresponsive_seconds; one heartbeat event per rollout for short rollouts).
FOREIGN_HEARTBEAT_SECONDS = 0.5


class EventSourcedStore:
    """Agent Lightning 0.3.0's LightningStore semantics over an event log and a folded view.

    Background work (the follower, the periodic watchdog) runs from `start()`, or from the first call made
    inside an event loop for stores built outside one; `close()` stops all of it.
    """

    def __init__(self, log_: EventLog, view: StoreView, follower: Follower, *, producer_id: str = "store",
                 scan_debounce_seconds: float = 10.0, clock: Callable[[], float] = time.time,
                 router: Router | None = None) -> None:
        self.view = view
        #: Where commands about a rollout are decided (`store.routing`): everything here without a store group.
        self.router = router or Router()
        self._log = log_
        self._follower = follower
        follower.on_folded = self._on_folded
        follower.on_failure = self._on_failure
        self._producer_id = producer_id
        self._clock = clock
        self._debounce = scan_debounce_seconds
        self._last_scan: float | None = None
        self._started = clock()
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._waits_interrupted = False
        self._committer = Committer(log_, view, producer_id, self.notify_applied, clock,
                                    on_fold_failure=self._on_failure, placement=lambda: self.router.placement)
        #: (rollout, attempt) pairs with foreign spans whose heartbeat is still to be decided, in arrival order.
        self._beats: dict[tuple[str, str], None] = {}
        self._beating: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._closed = False
        #: Why the store stopped serving, once it did; None while healthy.
        self.failure: BaseException | None = None
        #: Called once with the error when the store turns unhealthy (the server exits on it).
        self.failure_listeners: list[Callable[[BaseException], None]] = []
        #: Called with every batch the follower folded (the log in order, own events included; not the catch-up
        #: on start): what metrics observe, on the event loop, so a listener must be quick.
        self.fold_listeners: list[Callable[[list[LoggedEvent]], None]] = []

    # -- plumbing -------------------------------------------------------------------------------
    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return {"thread_safe": False, "async_safe": True, "zero_copy": True, "otlp_traces": False}

    async def start(self) -> int:
        """Catch the view up with the log (the store answers nothing before), then follow it and run the
        watchdog. Returns how many events the catch-up folded."""
        applied = await self._follower.catch_up()
        self._run_background()
        if next(self.view.scan(keys.QUEUE), None) is not None:
            announced = await self._decide(dispatch_cmds.announce_queued)
            log.info("announced %d queued rollouts to the runners again", announced)
        return applied

    def _run_background(self) -> None:
        if self._watchdog is None and not self._closed:
            self._follower.start()
            self._watchdog = asyncio.get_running_loop().create_task(self._watch(), name="agl-watchdog")

    def _check_serving(self) -> None:
        if self.failure is not None:
            raise StoreUnhealthyError(f"the store stopped serving: {self.failure}") from self.failure
        if self._closed:
            raise StoreUnhealthyError("the store is closed")
        self._run_background()

    def notify_applied(self, events: list[LoggedEvent]) -> None:
        """Wake `wait_for_rollouts` callers whose rollout just finished (own events or read from the log)."""
        if not self._waiters:
            return
        for event in events:
            if event.kind in FINISHING_KINDS and event.key in self._waiters:
                rollout = self.view.get(keys.rollout(event.key))
                if rollout is not None and rollout["status"] in FINISHED_STATUSES:
                    for future in self._waiters.pop(event.key):
                        if not future.done():
                            future.set_result(None)

    def _on_folded(self, events: list[LoggedEvent]) -> None:
        """Every batch the follower folded: wake waiters, and treat spans others appended as heartbeats."""
        self.notify_applied(events)
        for listener in self.fold_listeners:
            listener(events)
        self._beats.update(dict.fromkeys((e.record["span"]["rollout_id"], e.record["span"]["attempt_id"])
                                         for e in events if e.kind == Kind.SPAN_ADDED
                                         and e.record["producer_id"] != self._producer_id))
        if self._beats and (self._beating is None or self._beating.done()):
            self._beating = asyncio.get_running_loop().create_task(self._beat(), name="agl-heartbeats")

    def _on_failure(self, error: BaseException) -> None:
        """The view stopped following: fail every waiter and every later call, tell the listeners once."""
        self.failure = error
        self._answer_waiters()  # they see the failure when they wake
        for listener in self.failure_listeners:
            listener(error)

    async def _beat(self) -> None:
        """Decide the heartbeats of foreign spans off the follower's path: it keeps folding meanwhile
        (a finishing attempt waits for the fold), and spans arriving meanwhile join the next decision."""
        while self._beats:
            pairs, self._beats = list(self._beats), {}
            try:
                await self.record_heartbeats(pairs)
            except Exception:  # the next span of that attempt is another heartbeat; keep following
                log.exception("recording heartbeats failed")

    async def _watch(self) -> None:
        """Timeouts fire even when nobody calls the store (upstream only checks before calls)."""
        while True:
            await asyncio.sleep(max(self._debounce, 1.0))
            try:
                await self.healthcheck()
            except StoreUnhealthyError:
                return
            except Exception:  # a failed scan is retried next period; the store keeps serving
                log.exception("watchdog scan failed")

    def backpressure(self) -> dict[str, BackpressureStats]:
        """Waits for room in each bounded queue of this store's write path, by queue (the server's `/metrics`)."""
        return {"committer": self._committer.backpressure.stats}

    async def _decide(self, command: Callable[[DecisionContext], Any]) -> Any:
        self._check_serving()
        return await self._committer.run(command)

    async def healthcheck(self) -> None:
        """The watchdog, lazily before most calls as upstream, at most once per debounce period."""
        self._check_serving()
        now = self._clock()
        if self._last_scan is not None and now - self._last_scan < self._debounce:
            return
        self._last_scan = now
        await self.scan_unhealthy()

    async def scan_unhealthy(self) -> int:
        active = [rid[len(keys.ACTIVE):] for rid, _ in self.view.scan(keys.ACTIVE)]
        if not active:
            return 0

        def scan(ctx: DecisionContext) -> int:
            rollouts = [r for r in (ctx.rollout(rid) for rid in active if ctx.placement.owns(rid)) if r is not None]
            return attempt_cmds.scan_unhealthy(ctx, rollouts)

        return await self._decide(scan)

    def interrupt_waits(self) -> None:
        """Answer every `wait_for_rollouts` now, and later ones at once, with what has finished: the server
        is shutting down and must not wait out long polls (their callers poll again elsewhere)."""
        self._waits_interrupted = True
        self._answer_waiters()

    def _answer_waiters(self) -> None:
        for futures in self._waiters.values():
            for future in futures:
                if not future.done():
                    future.set_result(None)
        self._waiters.clear()

    async def close(self) -> None:
        """Stop background work, let in-flight commits settle, release the log and the view. Idempotent: the
        server closes the stores it served, and their owner may close them too."""
        if self._closed:
            return
        self._closed = True
        self.interrupt_waits()
        for task in (self._watchdog, self._beating):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self._follower.stop()
        await self._committer.close()
        await asyncio.to_thread(self._log.close)
        self._follower.source.close()
        self.view.close()

    # -- a store group ----------------------------------------------------------------------------
    async def _forward(self, owner: str, path: str, body: Any) -> Any:
        """POST `body` to `path` at the store `owner`, then wait until this store's view holds what the owner
        wrote, so that whoever called here reads their own write here next."""
        assert self.router.peers is not None, "a store group has peers"
        answer = await self.router.peers.call(owner, "POST", path, body)
        await asyncio.gather(*(self._follower.wait_folded(topic) for topic in FORWARD_FOLDS))
        return answer

    async def _forward_enqueue(self, owner: str, requests: Sequence[EnqueueRolloutRequest]) -> list[Rollout]:
        return [Rollout.model_validate(r)
                for r in await self._forward(owner, "/queues/rollouts/enqueue", {"rollouts": requests})]

    async def catch_up_rollouts(self) -> None:
        """Fold the rollouts topic up to its end (an ingester taking over task-requests partitions)."""
        await self._follower.wait_folded(Topic.ROLLOUTS)

    async def take_over(self, partitions: set[int]) -> None:
        """The store group gave us `partitions`: fold what their previous owner wrote (it drained, or died with
        its last acknowledged events in the log), then decide for them, and announce their queue again."""
        ownership = self.router.ownership
        assert ownership is not None
        ownership.acquire(partitions)
        await asyncio.gather(*(self._follower.wait_folded(topic) for topic in FORWARD_FOLDS))
        ownership.acquired(partitions)
        announced = await self._decide(dispatch_cmds.announce_queued)
        watched = await self._decide(lambda ctx: self._watch_from_now(ctx, partitions))
        log.info("took over partitions %s (%d queued rollouts announced again, %d running attempts watched from "
                 "now)", sorted(partitions), announced, watched)

    def _watch_from_now(self, ctx: DecisionContext, partitions: set[int]) -> int:
        """A heartbeat for every running attempt of `partitions`: while no store owned them, nobody decided the
        heartbeats their runners' spans imply, so the watchdog would declare live attempts unresponsive (and a
        retry would then run beside the live one). Their silence is timed from the take-over instead."""
        beaten = 0
        for key, _ in list(ctx.scan(keys.ACTIVE)):
            rid = key[len(keys.ACTIVE):]
            if ctx.placement.partition(rid) not in partitions:
                continue
            attempt = ctx.latest_attempt(rid)
            if attempt is not None and attempt["status"] == "running":
                span_cmds.heartbeat(ctx, rid, attempt["attempt_id"])
                beaten += 1
        return beaten

    async def hand_over(self, partitions: set[int]) -> None:
        """The store group takes `partitions` away: stop deciding for them, and return once everything decided
        for them so far is durable, before the next owner starts from the log."""
        assert self.router.ownership is not None
        self.router.ownership.release(partitions)
        await self._committer.drain()

    # -- reads helpers ----------------------------------------------------------------------------
    def _latest_attempt(self, rid: str) -> dict[str, Any] | None:
        found = None
        for _, attempt in self.view.scan(keys.attempts_of(rid)):
            found = attempt
        return found

    def _with_attempt(self, rollout: dict[str, Any]) -> Rollout | AttemptedRollout:
        attempt = self._latest_attempt(rollout["rollout_id"])
        if attempt is None:
            return Rollout.model_validate(rollout)
        return AttemptedRollout.model_validate({**rollout, "attempt": attempt})

    # -- rollouts ------------------------------------------------------------------------------------
    async def start_rollout(self, input: Any, mode: Any = None, resources_id: str | None = None,
                            config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None,
                            worker_id: str | None = None) -> AttemptedRollout:
        await self.healthcheck()

        async def here() -> AttemptedRollout:
            rollout, attempt = await self._decide(lambda ctx: rollout_cmds.start_rollout(
                ctx, input, mode, resources_id, config, metadata, worker_id))
            return AttemptedRollout.model_validate({**rollout, "attempt": attempt})

        async def there(owner: str) -> AttemptedRollout:
            return AttemptedRollout.model_validate(await self._forward(owner, "/rollouts", {
                "input": input, "mode": mode, "resources_id": resources_id, "config": config,
                "metadata": metadata, "worker_id": worker_id}))

        return await self.router.create(here, there)

    async def enqueue_rollout(self, input: Any, mode: Any = None, resources_id: str | None = None,
                              config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None
                              ) -> Rollout:
        await self.healthcheck()

        async def here() -> Rollout:
            return Rollout.model_validate(await self._decide(lambda ctx: rollout_cmds.enqueue_rollout(
                ctx, input, mode, resources_id, config, metadata)))

        async def there(owner: str) -> Rollout:
            request = EnqueueRolloutRequest(input=input, mode=mode, resources_id=resources_id, config=config,
                                            metadata=metadata)
            return (await self._forward_enqueue(owner, [request]))[0]

        return await self.router.create(here, there)

    async def ingest_task(self, key: str, request: TaskRequest) -> tuple[str, bool]:
        """Enqueue the task request with idempotency key `key` unless that key was enqueued before:
        (rollout id, whether it was enqueued now). Raises InvalidTaskRequest for an unknown resources id.
        In a store group, waits until this store owns a partition to create the rollout in."""
        await self.router.owning()
        return await self._decide(lambda ctx: ingest_cmds.ingest_task(ctx, key, request))

    def task_rollout(self, key: str) -> str | None:
        """The rollout the task request with idempotency key `key` became, if it was ingested."""
        return self.view.get(keys.task_key(key))

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        await self.healthcheck()

        def enqueue_all(ctx: DecisionContext) -> list[dict[str, Any]]:
            latest = ctx.latest_resources_id()  # resolved once per batch, as upstream
            return [rollout_cmds.enqueue_rollout(ctx, r.input, r.mode, r.resources_id or latest, r.config,
                                                 r.metadata) for r in rollouts]

        async def here() -> list[Rollout]:
            return [Rollout.model_validate(r) for r in await self._decide(enqueue_all)]

        return await self.router.create(here, lambda owner: self._forward_enqueue(owner, rollouts))

    async def dequeue_rollout(self, worker_id: str | None = None) -> AttemptedRollout | None:
        claimed = await self.dequeue_many_rollouts(limit=1, worker_id=worker_id)
        return claimed[0] if claimed else None

    async def dequeue_many_rollouts(self, *, limit: int = 1, worker_id: str | None = None
                                    ) -> Sequence[AttemptedRollout]:
        await self.healthcheck()
        if limit <= 0:
            return []
        claimed = await self._decide(lambda ctx: rollout_cmds.dequeue_rollouts(ctx, limit, worker_id))
        found = [AttemptedRollout.model_validate({**rollout, "attempt": attempt}) for rollout, attempt in claimed]
        for other in self.router.others():  # a store group: the other owners' queues, once ours is empty
            if len(found) >= limit:
                break
            try:
                found += [AttemptedRollout.model_validate(r) for r in await self._forward(
                    other, "/queues/rollouts/dequeue", {"limit": limit - len(found), "worker_id": worker_id})]
            except PeerUnavailableError as exc:  # its queue is its owner's next: nothing dequeued there now
                log.warning("dequeue skipped store %s: %s", other, exc)
                self.router.refresh()
        return found

    async def claim_rollout(self, rollout_id: str, worker_id: str | None = None) -> Claim | None:
        """agl-events extension for runners on the tasks topic: take this queued rollout, if still queued.

        None when the rollout was already claimed (a task delivered twice, or dequeued over REST) or is
        not waiting.
        """
        return (await self.claim_rollouts([rollout_id], worker_id))[0]

    async def finish_attempt(self, rollout_id: str, attempt_id: str, status: Literal["succeeded", "failed"],
                             spans_through: Mapping[int, int]) -> Attempt:
        """agl-events extension for runners: end an attempt whose spans the runner sent to the span topic
        itself, up to `spans_through` (partition -> offset past its last span, from its delivery reports).
        The view folds that far first, so whoever waits for the rollout reads all its spans; unlike
        `update_attempt`, no request to the log for where the span partitions end."""
        await self.healthcheck()

        async def here() -> Attempt:
            await self._follower.wait_folded(Topic.SPANS, spans_through)
            return await self._update_attempt(rollout_id, attempt_id, status=status)

        async def there(owner: str) -> Attempt:
            return Attempt.model_validate(await self._forward(
                owner, f"/rollouts/{rollout_id}/attempts/{attempt_id}/finish",
                {"status": status, "spans_through": spans_through}))

        return await self.router.run(rollout_id, here, there)

    async def claim_rollouts(self, rollout_ids: Sequence[str], worker_id: str | None = None) -> list[Claim | None]:
        """agl-events extension: `claim_rollout` for a runner's several free slots at once, decided as one
        command (one HTTP call and one commit for the batch); None for each rollout no longer waiting.
        The rollouts may lie in any partitions."""
        await self.healthcheck()

        def here(indices: list[int]) -> Awaitable[list[Claim | None]]:
            rids = [rollout_ids[i] for i in indices]
            return self._decide(owned(rids, lambda ctx: [task_cmds.claim(ctx, rid, worker_id) for rid in rids]))

        async def there(owner: str, indices: list[int]) -> list[Claim | None]:
            answers = await self._forward(owner, "/claims", {"rollout_ids": [rollout_ids[i] for i in indices],
                                                             "worker_id": worker_id})
            return [Claim.model_validate(a) if a["rollout"] is not None else None for a in answers]

        return await self.router.run_many(rollout_ids, here, there)

    async def finish_attempts(self, finishes: Sequence[AttemptFinish]) -> list[FinishOutcome]:
        """agl-events extension: `finish_attempt` for several attempts of a runner at once. The view folds
        to the furthest offsets any of them names, then each is decided as its own command (so one unknown
        attempt fails alone, with its error in its outcome); they share the committer's batch."""
        await self.healthcheck()

        async def there(owner: str, indices: list[int]) -> list[FinishOutcome]:
            answers = await self._forward(owner, "/attempts/finish", {"finishes": [finishes[i] for i in indices]})
            return [FinishOutcome.model_validate(a) for a in answers]

        return await self.router.run_many([f.rollout_id for f in finishes],
                                          lambda indices: self._finish_here([finishes[i] for i in indices]), there)

    async def _finish_here(self, finishes: Sequence[AttemptFinish]) -> list[FinishOutcome]:
        through: dict[int, int] = {}
        for finish in finishes:
            for partition, end in finish.spans_through.items():
                through[partition] = max(end, through.get(partition, 0))
        await self._follower.wait_folded(Topic.SPANS, through)
        decided = await asyncio.gather(*(self._update_attempt(f.rollout_id, f.attempt_id, status=f.status)
                                         for f in finishes), return_exceptions=True)
        outcomes = []
        for result in decided:
            if isinstance(result, StoreUnhealthyError | NotOwnerError):
                raise result
            if isinstance(result, BaseException):
                outcomes.append(FinishOutcome(error=f"{type(result).__name__}: {result}"))
            else:
                outcomes.append(FinishOutcome(attempt=result))
        return outcomes

    async def record_heartbeats(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Spans someone else appended (a runner's tracer) are heartbeats: decide what they imply.

        Only where they change something the watchdog looks at: they revive a preparing or unresponsive
        attempt, and refresh a running one whose heartbeat is older than FOREIGN_HEARTBEAT_SECONDS. A
        runner streams spans in many small batches; an event per batch would cost an append each."""
        def beat(ctx: DecisionContext) -> None:
            for rid, aid in dict.fromkeys(pairs):
                if not ctx.placement.owns(rid):  # its owner decides (it folds the same spans)
                    continue
                attempt = ctx.attempt(rid, aid)
                if attempt is None or attempt["status"] not in ("preparing", "unresponsive", "running"):
                    continue
                if attempt["status"] == "running" and \
                        ctx.now - (attempt["last_heartbeat_time"] or 0.0) < FOREIGN_HEARTBEAT_SECONDS:
                    continue
                span_cmds.heartbeat(ctx, rid, aid)

        await self._decide(beat)

    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout:
        await self.healthcheck()

        async def here() -> AttemptedRollout:
            rollout, attempt = await self._decide(owned(rollout_id, lambda ctx: rollout_cmds.start_attempt(
                ctx, rollout_id, worker_id)))
            return AttemptedRollout.model_validate({**rollout, "attempt": attempt})

        async def there(owner: str) -> AttemptedRollout:
            return AttemptedRollout.model_validate(await self._forward(
                owner, f"/rollouts/{rollout_id}/attempts", {"worker_id": worker_id}))

        return await self.router.run(rollout_id, here, there)

    async def update_rollout(self, rollout_id: str, input: Any = UNSET, mode: Any = UNSET,
                             resources_id: Any = UNSET, status: Any = UNSET, config: Any = UNSET,
                             metadata: Any = UNSET) -> Rollout:
        await self.healthcheck()
        given = dict(input=input, mode=mode, resources_id=resources_id, status=status, config=config,
                     metadata=metadata)

        async def here() -> Rollout:
            return Rollout.model_validate(await self._decide(owned(rollout_id, lambda ctx: rollout_cmds.update_rollout(
                ctx, rollout_id, **given))))

        async def there(owner: str) -> Rollout:
            return Rollout.model_validate(await self._forward(
                owner, f"/rollouts/{rollout_id}", {k: v for k, v in given.items() if v is not UNSET}))

        return await self.router.run(rollout_id, here, there)

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        await self.healthcheck()
        rollout = self.view.get(keys.rollout(rollout_id))
        return None if rollout is None else self._with_attempt(rollout)

    async def query_rollouts(self, *, status_in: Sequence[str] | None = None,
                             rollout_id_in: Sequence[str] | None = None, rollout_id_contains: str | None = None,
                             filter_logic: str = "and", sort_by: str | None = None, sort_order: str = "asc",
                             limit: int = -1, offset: int = 0, status: Sequence[str] | None = None,
                             rollout_ids: Sequence[str] | None = None
                             ) -> PaginatedResult[Rollout | AttemptedRollout]:
        if status is not None or rollout_ids is not None:
            warnings.warn("status and rollout_ids are deprecated; use status_in and rollout_id_in",
                          DeprecationWarning, stacklevel=2)
        status_in = status_in if status_in is not None else status
        rollout_id_in = rollout_id_in if rollout_id_in is not None else rollout_ids
        await self.healthcheck()
        conditions = q.conditions(among={"status": status_in, "rollout_id": rollout_id_in},
                                  containing={"rollout_id": rollout_id_contains})
        candidates = self._rollout_candidates(rollout_id_in if filter_logic == "and" else None)
        page, total = q.select(candidates, Rollout, conditions, filter_logic, [], sort_by or "start_time",
                               sort_order if sort_by else "asc", limit, offset)
        return PaginatedResult(items=[self._with_attempt(r) for r in page], limit=limit, offset=offset,
                               total=total)

    def _rollout_candidates(self, ids: Sequence[str] | None) -> list[dict[str, Any]]:
        """Point reads when the ids are known (and ANDed), else a scan of all rollouts."""
        if ids is not None:
            found = (self.view.get(keys.rollout(rid)) for rid in dict.fromkeys(ids))
            return [r for r in found if r is not None]
        return [r for _, r in self.view.scan(keys.ROLLOUTS)]

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: float | None = None) -> list[Rollout]:
        """Return the finished ones among `rollout_ids` as soon as each finishes, or at the deadline."""
        await self.healthcheck()
        self._check_serving()  # again: the store may have failed during the scan, and no one would wake us
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[None]] = []
        for rid in dict.fromkeys(rollout_ids):
            rollout = self.view.get(keys.rollout(rid))
            if rollout is not None and rollout["status"] not in FINISHED_STATUSES:
                future: asyncio.Future[None] = loop.create_future()
                self._waiters.setdefault(rid, []).append(future)
                futures.append(future)
        if futures and (timeout is None or timeout > 0) and not self._waits_interrupted:
            try:
                await asyncio.wait(futures, timeout=timeout)
            finally:
                for future in futures:
                    future.cancel()
                self._drop_cancelled_waiters()
            if self.failure is not None:
                raise StoreUnhealthyError(f"the store stopped serving: {self.failure}") from self.failure
        finished = []
        for rid in rollout_ids:
            rollout = self.view.get(keys.rollout(rid))
            if rollout is not None and rollout["status"] in FINISHED_STATUSES:
                finished.append(Rollout.model_validate(rollout))
        return finished

    def _drop_cancelled_waiters(self) -> None:
        for rid in list(self._waiters):
            alive = [f for f in self._waiters[rid] if not f.done()]
            if alive:
                self._waiters[rid] = alive
            else:
                del self._waiters[rid]

    # -- attempts -----------------------------------------------------------------------------------
    async def query_attempts(self, rollout_id: str, *, sort_by: str | None = "sequence_id",
                             sort_order: str = "asc", limit: int = -1, offset: int = 0
                             ) -> PaginatedResult[Attempt]:
        await self.healthcheck()
        attempts = [a for _, a in self.view.scan(keys.attempts_of(rollout_id))]
        page, total = q.select(attempts, Attempt, [], "and", [], sort_by, sort_order, limit, offset)
        return PaginatedResult(items=[Attempt.model_validate(a) for a in page], limit=limit, offset=offset,
                               total=total)

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        await self.healthcheck()
        attempt = self._latest_attempt(rollout_id)
        return None if attempt is None else Attempt.model_validate(attempt)

    async def update_attempt(self, rollout_id: str, attempt_id: str, status: Any = UNSET,
                             worker_id: Any = UNSET, last_heartbeat_time: Any = UNSET,
                             metadata: Any = UNSET) -> Attempt:
        """A runner writes its spans to the log before it reports the attempt finished; fold them first, so
        whoever waits for the rollout reads all its spans (`finish_attempt` says how far they go)."""
        await self.healthcheck()
        given = dict(status=status, worker_id=worker_id, last_heartbeat_time=last_heartbeat_time, metadata=metadata)

        async def here() -> Attempt:
            if status in ("succeeded", "failed"):
                await self._follower.wait_folded(Topic.SPANS)
            return await self._update_attempt(rollout_id, attempt_id, **given)

        async def there(owner: str) -> Attempt:
            return Attempt.model_validate(await self._forward(
                owner, f"/rollouts/{rollout_id}/attempts/{attempt_id}",
                {k: v for k, v in given.items() if v is not UNSET}))

        return await self.router.run(rollout_id, here, there)

    async def _update_attempt(self, rollout_id: str, attempt_id: str, status: Any = UNSET,
                              worker_id: Any = UNSET, last_heartbeat_time: Any = UNSET,
                              metadata: Any = UNSET) -> Attempt:
        attempt = await self._decide(owned(rollout_id, lambda ctx: attempt_cmds.update_attempt(
            ctx, rollout_id, attempt_id, status=status, worker_id=worker_id,
            last_heartbeat_time=last_heartbeat_time, metadata=metadata)))
        return Attempt.model_validate(attempt)

    # -- spans ----------------------------------------------------------------------------------------
    async def add_span(self, span: Span) -> Span | None:
        added = await self.add_many_spans([span])
        return added[0] if added else None

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        """The spans inserted (duplicates skipped), each decided by its rollout's owner."""
        if not spans:
            return []

        async def here(indices: list[int]) -> list[bool]:
            mine = [spans[i] for i in indices]
            dumped = [s.model_dump(mode="json") for s in mine]
            inserted = await self._decide(owned([s.rollout_id for s in mine],
                                                lambda ctx: span_cmds.add_spans(ctx, dumped)))
            return [j in set(inserted) for j in range(len(mine))]

        async def there(owner: str, indices: list[int]) -> list[bool]:
            return [await self._forward(owner, "/spans", spans[i]) is not None for i in indices]

        added = await self.router.run_many([s.rollout_id for s in spans], here, there)
        return [span for span, ok in zip(spans, added, strict=True) if ok]

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        return (await self.get_many_span_sequence_ids([(rollout_id, attempt_id)]))[0]

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        if not rollout_attempt_ids:
            return []
        pairs = [(rid, aid) for rid, aid in rollout_attempt_ids]

        def here(indices: list[int]) -> Awaitable[list[int]]:
            mine = [pairs[i] for i in indices]
            return self._decide(owned([rid for rid, _ in mine], lambda ctx: span_cmds.allocate_sequence_ids(ctx, mine)))

        async def there(owner: str, indices: list[int]) -> list[int]:
            return [(await self._forward(owner, "/spans/next", {"rollout_id": pairs[i][0],
                                                                "attempt_id": pairs[i][1]}))["sequence_id"]
                    for i in indices]

        return await self.router.run_many([rid for rid, _ in pairs], here, there)

    async def query_spans(self, rollout_id: str, attempt_id: str | None = None, *,
                          trace_id: str | None = None, trace_id_contains: str | None = None,
                          span_id: str | None = None, span_id_contains: str | None = None,
                          parent_id: str | None = None, parent_id_contains: str | None = None,
                          name: str | None = None, name_contains: str | None = None,
                          filter_logic: Literal["and", "or"] = "and", limit: int = -1, offset: int = 0,
                          sort_by: str | None = "sequence_id", sort_order: str = "asc") -> PaginatedResult[Span]:
        await self.healthcheck()
        must: list[q.Condition] = []
        if attempt_id == "latest":
            latest = self._latest_attempt(rollout_id)
            if latest is None:
                return PaginatedResult(items=[], limit=limit, offset=offset, total=0)
            must.append(q.exact("attempt_id", latest["attempt_id"]))
        elif attempt_id is not None:
            must.append(q.exact("attempt_id", attempt_id))
        conditions = q.conditions(
            equal={"trace_id": trace_id, "span_id": span_id, "parent_id": parent_id, "name": name},
            containing={"trace_id": trace_id_contains, "span_id": span_id_contains,
                        "parent_id": parent_id_contains, "name": name_contains})
        spans = [s for _, s in self.view.scan(keys.spans_of(rollout_id))]
        page, total = q.select(spans, Span, conditions, filter_logic, must, sort_by, sort_order, limit, offset)
        return PaginatedResult(items=[Span.model_validate(s) for s in page], limit=limit, offset=offset,
                               total=total)

    # -- resources ------------------------------------------------------------------------------------
    async def add_resources(self, resources: dict[str, Any]) -> ResourcesUpdate:
        dumped = _dump_resources(resources)
        return ResourcesUpdate.model_validate(
            await self._decide(lambda ctx: resource_cmds.add_resources(ctx, dumped)))

    async def update_resources(self, resources_id: str, resources: dict[str, Any]) -> ResourcesUpdate:
        await self.healthcheck()
        dumped = _dump_resources(resources)
        return ResourcesUpdate.model_validate(
            await self._decide(lambda ctx: resource_cmds.update_resources(ctx, resources_id, dumped)))

    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:
        found = self.view.get(keys.resources(resources_id))
        return None if found is None else ResourcesUpdate.model_validate(found)

    async def get_latest_resources(self) -> ResourcesUpdate | None:
        latest = self.view.get(keys.LATEST_RESOURCES)
        return None if latest is None else await self.get_resources_by_id(latest)

    async def query_resources(self, *, resources_id: str | None = None, resources_id_contains: str | None = None,
                              sort_by: str | None = None, sort_order: str = "asc", limit: int = -1,
                              offset: int = 0) -> PaginatedResult[ResourcesUpdate]:
        conditions = q.conditions(equal={"resources_id": resources_id},
                                  containing={"resources_id": resources_id_contains})
        snapshots = [s for _, s in self.view.scan(keys.RESOURCES)]
        page, total = q.select(snapshots, ResourcesUpdate, conditions, "and", [], sort_by or "create_time",
                               sort_order if sort_by else "asc", limit, offset)
        return PaginatedResult(items=[ResourcesUpdate.model_validate(s) for s in page], limit=limit,
                               offset=offset, total=total)

    # -- prompt optimization (agl-events extension) -----------------------------------------------------
    async def record_prompt_candidate(self, step: PromptCandidateStep) -> None:
        """Append one APO step to the log (durable when this returns), so the run can be audited and replayed."""
        record = step.model_dump()
        await self._decide(lambda ctx: candidate_cmds.record_prompt_candidate(ctx, record))

    async def query_prompt_candidates(self, run_id: str | None = None) -> list[PromptCandidate]:
        """The candidates of one APO run (or of every run), in the order they were proposed."""
        prefix = keys.PROMPT_CANDIDATES if run_id is None else keys.prompt_candidate(run_id, "")
        found = [PromptCandidate.model_validate({**entry, "scores": sorted(entry["scores"].values(),
                                                                           key=lambda s: s["time"])})
                 for _, entry in self.view.scan(prefix)]
        return sorted(found, key=lambda c: (c.time is None, c.time or 0.0))

    # -- workers ----------------------------------------------------------------------------------------
    async def update_worker(self, worker_id: str, heartbeat_stats: Any = UNSET) -> Worker:
        if heartbeat_stats is None:
            raise TypeError("heartbeat_stats must be a mapping, not None")
        return Worker.model_validate(
            await self._decide(lambda ctx: worker_cmds.update_worker(ctx, worker_id, heartbeat_stats)))

    async def get_worker_by_id(self, worker_id: str) -> Worker | None:
        found = self.view.get(keys.worker(worker_id))
        return None if found is None else Worker.model_validate(found)

    async def query_workers(self, *, status_in: Sequence[str] | None = None, worker_id_contains: str | None = None,
                            filter_logic: str = "and", sort_by: str | None = None, sort_order: str = "asc",
                            limit: int = -1, offset: int = 0) -> PaginatedResult[Worker]:
        await self.healthcheck()
        conditions = q.conditions(among={"status": status_in}, containing={"worker_id": worker_id_contains})
        # First-seen order, as upstream's insertion order; sort_by sorts stably on top of it. A view written
        # before workers had an ordinal lists those first, by id.
        workers = sorted((w for _, w in self.view.scan(keys.WORKERS)), key=lambda w: w.get("ordinal", -1))
        page, total = q.select(workers, Worker, conditions, filter_logic, [], sort_by, sort_order, limit, offset)
        return PaginatedResult(items=[Worker.model_validate(w) for w in page], limit=limit, offset=offset,
                               total=total)

    # -- statistics -------------------------------------------------------------------------------------
    async def statistics(self) -> dict[str, Any]:
        counts = {entity: self.view.get(keys.count(entity)) or 0
                  for entity in ("rollouts", "attempts", "spans", "resources", "workers")}
        stats = {"name": type(self).__name__, **{f"total_{k}": v for k, v in counts.items()},
                 "uptime": self._clock() - self._started}
        ownership = self.router.ownership
        if ownership is not None:  # a store group: who decides what (agl-events status shows it)
            stats["store_group"] = {"url": ownership.own_url, "partitions": ownership.partitions,
                                    "owned": sorted(ownership.owned),
                                    "owners": {str(p): url for p, url in sorted(ownership.owners.items())}}
        return stats


_NAMED_RESOURCES = TypeAdapter(NamedResources)


def _dump_resources(resources: dict[str, Any]) -> dict[str, Any]:
    """Validate NamedResources (models or plain dicts) into JSON-ready dicts."""
    plain = {k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in resources.items()}
    return _NAMED_RESOURCES.dump_python(_NAMED_RESOURCES.validate_python(plain), mode="json")

"""The store contract: Agent Lightning 0.3.0's LightningStore, our extensions, and what the server observes.

Every store the server serves (in-memory, Kafka, read-only) is a `LightningStore`; the server, the metrics and
the `/ui` figures call these methods and nothing else. Where a backend lacks something the server observes,
the base answers for it (a store that writes nothing has no back-pressure, one without a view no figures), so
nobody probes a store for attributes. Behaviour (status machines, retries, sequence ids) is specified in the
shared docs' `agl-store-contract.md`; `store.service` implements it once for every backend.

Errors, for every method: ValueError (HTTP 400) for an unknown id or a bad argument; StoreUnhealthyError (503)
once the store stopped serving; NoOwnerError (503) when no store of a group decides for a rollout in time;
ReadOnlyStoreError (405) for a write to a read-only store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from agl_events.types import (
    UNSET,
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
    RolloutMode,
    RolloutStatus,
    Span,
    Worker,
    WorkerStatus,
)

if TYPE_CHECKING:
    from agl_events.events.task_request import TaskRequest
    from agl_events.log.backpressure import BackpressureStats
    from agl_events.log.records import LoggedEvent
    from agl_events.views.store_view import StoreView


SortOrder = Literal["asc", "desc"]
FilterLogic = Literal["and", "or"]


class LightningStoreCapabilities(TypedDict, total=False):
    thread_safe: bool
    async_safe: bool
    zero_copy: bool
    otlp_traces: bool


class LightningStore(ABC):
    """What every store offers. Coroutines unless said otherwise; the batched forms decide each item alone."""

    # -- Agent Lightning 0.3.0 ------------------------------------------------------------------------------
    @property
    @abstractmethod
    def capabilities(self) -> LightningStoreCapabilities:
        """Upstream's capability flags (not a coroutine)."""

    @abstractmethod
    async def statistics(self) -> dict[str, Any]:
        """Totals by entity, uptime, and (in a store group) who owns which partition."""

    @abstractmethod
    async def start_rollout(self, input: Any, mode: RolloutMode | None = None, resources_id: str | None = None,
                            config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None,
                            worker_id: str | None = None) -> AttemptedRollout:
        """A new rollout with its first attempt already running (not queued); durable when it returns."""

    @abstractmethod
    async def enqueue_rollout(self, input: Any, mode: RolloutMode | None = None, resources_id: str | None = None,
                              config: RolloutConfig | None = None, metadata: dict[str, Any] | None = None
                              ) -> Rollout:
        """A new queued rollout (resources default to the latest); durable and dispatched when it returns."""

    @abstractmethod
    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        """`enqueue_rollout` for a batch, in order, with the latest resources resolved once for all."""

    async def dequeue_rollout(self, worker_id: str | None = None) -> AttemptedRollout | None:
        """The oldest queued rollout with a new attempt for `worker_id`, or None when the queue is empty."""
        claimed = await self.dequeue_many_rollouts(limit=1, worker_id=worker_id)
        return claimed[0] if claimed else None

    @abstractmethod
    async def dequeue_many_rollouts(self, *, limit: int = 1, worker_id: str | None = None
                                    ) -> Sequence[AttemptedRollout]:
        """Up to `limit` queued rollouts, oldest first, each with a new attempt; never waits for the queue."""

    @abstractmethod
    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout:
        """A new running attempt of an existing rollout (a manual retry)."""

    async def add_span(self, span: Span) -> Span | None:
        """The span as stored, or None for a duplicate (same rollout, attempt and sequence id): idempotent."""
        added = await self.add_many_spans([span])
        return added[0] if added else None

    @abstractmethod
    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        """The spans inserted, duplicates skipped; each is a heartbeat of its attempt."""

    @abstractmethod
    async def query_rollouts(self, *, status_in: Sequence[RolloutStatus] | None = None,
                             rollout_id_in: Sequence[str] | None = None, rollout_id_contains: str | None = None,
                             filter_logic: FilterLogic = "and", sort_by: str | None = None,
                             sort_order: SortOrder = "asc", limit: int = -1, offset: int = 0,
                             status: Sequence[RolloutStatus] | None = None,
                             rollout_ids: Sequence[str] | None = None,
                             ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """A page of rollouts with their latest attempt (`status`, `rollout_ids`: deprecated aliases)."""

    @abstractmethod
    async def query_attempts(self, rollout_id: str, *, sort_by: str | None = "sequence_id",
                             sort_order: SortOrder = "asc", limit: int = -1, offset: int = 0
                             ) -> PaginatedResult[Attempt]:
        """A page of the rollout's attempts (empty for an unknown rollout)."""

    @abstractmethod
    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        """The rollout with its latest attempt, or None."""

    @abstractmethod
    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """The attempt with the highest sequence id, or None."""

    @abstractmethod
    async def query_resources(self, *, resources_id: str | None = None, resources_id_contains: str | None = None,
                              sort_by: str | None = None, sort_order: SortOrder = "asc", limit: int = -1,
                              offset: int = 0) -> PaginatedResult[ResourcesUpdate]:
        """A page of resources snapshots (by creation time unless sorted otherwise)."""

    @abstractmethod
    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """A new resources snapshot, which becomes the latest."""

    @abstractmethod
    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        """Replace (or create) snapshot `resources_id`, which becomes the latest."""

    @abstractmethod
    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:
        """The snapshot, or None."""

    @abstractmethod
    async def get_latest_resources(self) -> ResourcesUpdate | None:
        """The snapshot added or updated last, or None."""

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        """Reserve the rollout's next span sequence id (shared by its attempts); never the same twice."""
        return (await self.get_many_span_sequence_ids([(rollout_id, attempt_id)]))[0]

    @abstractmethod
    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        """`get_next_span_sequence_id` for each pair, in order."""

    @abstractmethod
    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: float | None = None) -> list[Rollout]:
        """The finished ones among `rollout_ids`, as soon as all finish or at `timeout` (None: no deadline).
        Answered at once, with what finished, once `interrupt_waits` was called."""

    @abstractmethod
    async def query_spans(self, rollout_id: str, attempt_id: str | Literal["latest"] | None = None, *,
                          trace_id: str | None = None, trace_id_contains: str | None = None,
                          span_id: str | None = None, span_id_contains: str | None = None,
                          parent_id: str | None = None, parent_id_contains: str | None = None,
                          name: str | None = None, name_contains: str | None = None,
                          filter_logic: FilterLogic = "and", limit: int = -1, offset: int = 0,
                          sort_by: str | None = "sequence_id", sort_order: SortOrder = "asc"
                          ) -> PaginatedResult[Span]:
        """A page of the rollout's spans (of one attempt, or the latest one)."""

    @abstractmethod
    async def update_rollout(self, rollout_id: str, input: Any = UNSET, mode: Any = UNSET,
                             resources_id: Any = UNSET, status: Any = UNSET, config: Any = UNSET,
                             metadata: Any = UNSET) -> Rollout:
        """Apply the given fields (UNSET: untouched); a final status finishes the rollout."""

    @abstractmethod
    async def update_attempt(self, rollout_id: str, attempt_id: str | Literal["latest"], status: Any = UNSET,
                             worker_id: Any = UNSET, last_heartbeat_time: Any = UNSET,
                             metadata: Any = UNSET) -> Attempt:
        """Apply the given fields; a final status first waits until the view holds every span the log has."""

    @abstractmethod
    async def query_workers(self, *, status_in: Sequence[WorkerStatus] | None = None,
                            worker_id_contains: str | None = None, filter_logic: FilterLogic = "and",
                            sort_by: str | None = None, sort_order: SortOrder = "asc", limit: int = -1,
                            offset: int = 0) -> PaginatedResult[Worker]:
        """A page of workers, in first-seen order unless sorted."""

    @abstractmethod
    async def get_worker_by_id(self, worker_id: str) -> Worker | None:
        """The worker, or None."""

    @abstractmethod
    async def update_worker(self, worker_id: str, heartbeat_stats: Any = UNSET) -> Worker:
        """A heartbeat of the worker (created on first sight); TypeError for None stats."""

    # -- agl-events extensions: runners on the tasks topic, task requests, prompt candidates -------------
    async def claim_rollout(self, rollout_id: str, worker_id: str | None = None) -> Claim | None:
        """Take this queued rollout (a task the runner got from the tasks topic): None when it is no longer
        waiting (a task delivered twice, or dequeued over REST), so a claim is safe to repeat."""
        return (await self.claim_rollouts([rollout_id], worker_id))[0]

    @abstractmethod
    async def claim_rollouts(self, rollout_ids: Sequence[str], worker_id: str | None = None) -> list[Claim | None]:
        """`claim_rollout` for several rollouts of any partitions, decided as one command."""

    @abstractmethod
    async def finish_attempt(self, rollout_id: str, attempt_id: str, status: Literal["succeeded", "failed"],
                             spans_through: Mapping[int, int]) -> Attempt:
        """End an attempt whose spans the runner wrote to the span topic up to `spans_through` (partition ->
        offset past its last span): waits until the view holds them, so the rollout's readers see them all.
        ValueError for offsets past the log's end."""

    @abstractmethod
    async def finish_attempts(self, finishes: Sequence[AttemptFinish]) -> list[FinishOutcome]:
        """`finish_attempt` for several attempts: one outcome each, in order, an error failing only its own."""

    @abstractmethod
    async def ingest_task(self, key: str, request: TaskRequest) -> tuple[str, bool]:
        """Enqueue a task request unless its idempotency `key` was enqueued before: (rollout id, enqueued now).
        InvalidTaskRequest for an unknown resources id; in a store group, waits to own a partition."""

    @abstractmethod
    async def task_rollouts(self, keys: Sequence[str]) -> dict[str, str]:
        """The rollouts that those of the task requests `keys` ingested yet became (in a store group: in any
        member's partitions)."""

    @abstractmethod
    async def record_prompt_candidate(self, step: PromptCandidateStep) -> None:
        """Append one APO step to the log; durable when it returns."""

    @abstractmethod
    async def query_prompt_candidates(self, run_id: str | None = None) -> list[PromptCandidate]:
        """The candidates of one APO run (every run's without `run_id`), in the order proposed."""

    # -- what the server observes; the defaults are a store with nothing of the kind ---------------------
    async def start(self) -> int:
        """Catch up with the log and start background work; how many events the catch-up folded."""
        return 0

    async def close(self) -> None:
        """Stop background work and release the store's resources. Idempotent; concurrent calls share one."""
        return None

    def interrupt_waits(self) -> None:
        """Shutting down: answer every long poll now, and later ones at once (not a coroutine)."""
        return None

    @property
    def failure(self) -> BaseException | None:
        """Why the store stopped serving for good (every call then raises StoreUnhealthyError); None while it
        serves."""
        return None

    def add_failure_listener(self, listener: Callable[[BaseException], None]) -> None:
        """Call `listener` once with the error when the store stops serving (a store that cannot fail never
        calls it)."""
        return None

    def add_fold_listener(self, listener: Callable[[list[LoggedEvent]], None]) -> None:
        """Call `listener`, on the event loop, with every batch folded into the view from now on (the log in
        order, the store's own events included). Listeners must be quick."""
        return None

    @property
    def view(self) -> StoreView | None:
        """The folded view the store answers from, for figures; None for a store without one."""
        return None

    @property
    def view_dir(self) -> Path | None:
        """Where the view lives on disk, for its size; None for a view in memory."""
        return None

    @property
    def dead_letters_written(self) -> int | None:
        """Records this store copied to the dead-letter topic since it started; None without one."""
        return None

    def log_ends(self) -> dict[tuple[str, int], int]:
        """Where each followed partition ends as of the last fetch (asks the log nothing); {} without a log."""
        return {}

    def rollouts_by_status(self) -> dict[str, int]:
        """Rollouts in the view by status, counted as it is written ({} where nobody counts)."""
        return {}

    def backpressure(self) -> dict[str, BackpressureStats]:
        """Waits for room in each bounded queue of the write path, by queue ({} for a store writing nothing)."""
        return {}


__all__ = ["FilterLogic", "LightningStore", "LightningStoreCapabilities", "SortOrder"]

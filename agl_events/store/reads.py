"""The store's reads: every query, answered from the folded view with upstream's filtering and paging.

Plain functions of the view (no log, no waiting): the facade (`store.service`) runs the watchdog's hook
before the calls upstream checks before, then asks here.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from agl_events.reducers import keys
from agl_events.store import queries as q
from agl_events.types import (
    Attempt,
    AttemptedRollout,
    PaginatedResult,
    PromptCandidate,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)
from agl_events.views.store_view import StoreView

#: Entities kept per rollout (in its partitions), and those every store of a group folds whole.
PER_ROLLOUT = ("rollouts", "attempts", "spans")
GLOBAL = ("resources", "workers")


def rollout_order(sort_by: str | None, sort_order: str) -> tuple[str, str]:
    """Rollouts come by start time, oldest first, unless the caller sorts them otherwise."""
    return (sort_by, sort_order) if sort_by else ("start_time", "asc")


def rollout_base_order(rollout_id_in: Sequence[str] | None, filter_logic: str) -> q.Key:
    """The order `Reads.query_rollouts` takes its candidates in, which its stable sort keeps among equals: the
    ids asked for as given (ANDed), else the view's key order (by id)."""
    if rollout_id_in is not None and filter_logic == "and":
        position = {rid: i for i, rid in enumerate(dict.fromkeys(rollout_id_in))}
        return lambda rollout: position[rollout["rollout_id"]]
    return lambda rollout: rollout["rollout_id"]


class Reads:
    """Queries over `view`."""

    def __init__(self, view: StoreView) -> None:
        self.view = view

    def latest_attempt(self, rid: str) -> dict[str, Any] | None:
        found = None
        for _, attempt in self.view.scan(keys.attempts_of(rid)):
            found = attempt
        return found

    def _with_attempt(self, rollout: dict[str, Any]) -> Rollout | AttemptedRollout:
        attempt = self.latest_attempt(rollout["rollout_id"])
        if attempt is None:
            return Rollout.model_validate(rollout)
        return AttemptedRollout.model_validate({**rollout, "attempt": attempt})

    # -- rollouts ---------------------------------------------------------------------------------------
    def get_rollout_by_id(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        rollout = self.view.get(keys.rollout(rollout_id))
        return None if rollout is None else self._with_attempt(rollout)

    def query_rollouts(self, *, status_in: Sequence[str] | None, rollout_id_in: Sequence[str] | None,
                       rollout_id_contains: str | None, filter_logic: str, sort_by: str | None, sort_order: str,
                       limit: int, offset: int, status: Sequence[str] | None, rollout_ids: Sequence[str] | None,
                       among: q.Condition | None = None) -> PaginatedResult[Rollout | AttemptedRollout]:
        """`among`: only rollouts it holds for count (a store group's member answers for its partitions)."""
        if status is not None or rollout_ids is not None:
            warnings.warn("status and rollout_ids are deprecated; use status_in and rollout_id_in",
                          DeprecationWarning, stacklevel=3)
        status_in = status_in if status_in is not None else status
        rollout_id_in = rollout_id_in if rollout_id_in is not None else rollout_ids
        conditions = q.conditions(among={"status": status_in, "rollout_id": rollout_id_in},
                                  containing={"rollout_id": rollout_id_contains})
        candidates = self._rollout_candidates(rollout_id_in if filter_logic == "and" else None)
        sort_by, sort_order = rollout_order(sort_by, sort_order)
        page, total = q.select(candidates, Rollout, conditions, filter_logic, [] if among is None else [among],
                               sort_by, sort_order, limit, offset)
        return PaginatedResult(items=[self._with_attempt(r) for r in page], limit=limit, offset=offset,
                               total=total)

    def _rollout_candidates(self, ids: Sequence[str] | None) -> list[dict[str, Any]]:
        """Point reads when the ids are known (and ANDed), else a scan of all rollouts."""
        if ids is not None:
            found = (self.view.get(keys.rollout(rid)) for rid in dict.fromkeys(ids))
            return [r for r in found if r is not None]
        return [r for _, r in self.view.scan(keys.ROLLOUTS)]

    def task_rollouts(self, task_keys: Sequence[str]) -> dict[str, str]:
        """The keys among `task_keys` this view knows, with their rollouts (a key's rollout never changes, so a
        stale view's answer is still true, only maybe incomplete)."""
        found = {key: self.view.get(keys.task_key(key)) for key in task_keys}
        return {key: rid for key, rid in found.items() if rid is not None}

    # -- attempts and spans -----------------------------------------------------------------------------
    def query_attempts(self, rollout_id: str, *, sort_by: str | None, sort_order: str, limit: int, offset: int
                       ) -> PaginatedResult[Attempt]:
        attempts = [a for _, a in self.view.scan(keys.attempts_of(rollout_id))]
        page, total = q.select(attempts, Attempt, [], "and", [], sort_by, sort_order, limit, offset)
        return PaginatedResult(items=[Attempt.model_validate(a) for a in page], limit=limit, offset=offset,
                               total=total)

    def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        attempt = self.latest_attempt(rollout_id)
        return None if attempt is None else Attempt.model_validate(attempt)

    def query_spans(self, rollout_id: str, attempt_id: str | None, *, equal: dict[str, str | None],
                    containing: dict[str, str | None], filter_logic: str, limit: int, offset: int,
                    sort_by: str | None, sort_order: str) -> PaginatedResult[Span]:
        must: list[q.Condition] = []
        if attempt_id == "latest":
            latest = self.latest_attempt(rollout_id)
            if latest is None:
                return PaginatedResult(items=[], limit=limit, offset=offset, total=0)
            must.append(q.exact("attempt_id", latest["attempt_id"]))
        elif attempt_id is not None:
            must.append(q.exact("attempt_id", attempt_id))
        conditions = q.conditions(equal=equal, containing=containing)
        spans = list(self.view.spans(rollout_id))
        page, total = q.select(spans, Span, conditions, filter_logic, must, sort_by, sort_order, limit, offset)
        return PaginatedResult(items=[Span.model_validate(s) for s in page], limit=limit, offset=offset,
                               total=total)

    # -- resources, prompt candidates, workers ----------------------------------------------------------
    def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:
        found = self.view.get(keys.resources(resources_id))
        return None if found is None else ResourcesUpdate.model_validate(found)

    def get_latest_resources(self) -> ResourcesUpdate | None:
        latest = self.view.get(keys.LATEST_RESOURCES)
        return None if latest is None else self.get_resources_by_id(latest)

    def query_resources(self, *, resources_id: str | None, resources_id_contains: str | None, sort_by: str | None,
                        sort_order: str, limit: int, offset: int) -> PaginatedResult[ResourcesUpdate]:
        conditions = q.conditions(equal={"resources_id": resources_id},
                                  containing={"resources_id": resources_id_contains})
        snapshots = [s for _, s in self.view.scan(keys.RESOURCES)]
        page, total = q.select(snapshots, ResourcesUpdate, conditions, "and", [], sort_by or "create_time",
                               sort_order if sort_by else "asc", limit, offset)
        return PaginatedResult(items=[ResourcesUpdate.model_validate(s) for s in page], limit=limit,
                               offset=offset, total=total)

    def query_prompt_candidates(self, run_id: str | None) -> list[PromptCandidate]:
        prefix = keys.PROMPT_CANDIDATES if run_id is None else keys.prompt_candidate(run_id, "")
        found = [PromptCandidate.model_validate({**entry, "scores": sorted(entry["scores"].values(),
                                                                           key=lambda s: s["time"])})
                 for _, entry in self.view.scan(prefix)]
        return sorted(found, key=lambda c: (c.time is None, c.time or 0.0))

    def get_worker_by_id(self, worker_id: str) -> Worker | None:
        found = self.view.get(keys.worker(worker_id))
        return None if found is None else Worker.model_validate(found)

    def query_workers(self, *, status_in: Sequence[str] | None, worker_id_contains: str | None, filter_logic: str,
                      sort_by: str | None, sort_order: str, limit: int, offset: int) -> PaginatedResult[Worker]:
        conditions = q.conditions(among={"status": status_in}, containing={"worker_id": worker_id_contains})
        # First-seen order, as upstream's insertion order; sort_by sorts stably on top of it. A view written
        # before workers had an ordinal lists those first, by id.
        workers = sorted((w for _, w in self.view.scan(keys.WORKERS)), key=lambda w: w.get("ordinal", -1))
        page, total = q.select(workers, Worker, conditions, filter_logic, [], sort_by, sort_order, limit, offset)
        return PaginatedResult(items=[Worker.model_validate(w) for w in page], limit=limit, offset=offset,
                               total=total)

    def counts(self) -> dict[str, int]:
        """Totals by entity, as the reducers count them."""
        return {entity: self.view.get(keys.count(entity)) or 0 for entity in (*PER_ROLLOUT, *GLOBAL)}

    def counts_in(self, partitions: frozenset[int], count: int) -> dict[str, int]:
        """Totals of the per-rollout entities created in the rollouts partitions `partitions` (of `count`): the
        view's counts per log partition, whose topics have a multiple of `count` partitions, partition q holding
        the rollouts of rollouts partition q mod `count` (`store.partition_folds`)."""
        totals = dict.fromkeys(PER_ROLLOUT, 0)
        for key, created in self.view.scan(keys.PARTITION_COUNTS):
            entity, position = key[len(keys.PARTITION_COUNTS):].split("/", 1)
            if entity in totals and int(position.rsplit("/", 1)[1]) % count in partitions:
                totals[entity] += created
        return totals

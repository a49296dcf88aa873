"""What the store server tells about each experiment it serves: one set of figures for `/metrics` and `/ui`.

Two sources, both cheap to read at any moment:
- the store itself at read time: rollouts by status (`views.status_counts`, counted as the view is written,
  so no scan per scrape), consumer lag (the reader's cached log ends minus the view's stored positions: no
  broker request), the view's size on disk, dead letters written, resources versions;
- a `FoldObserver` per experiment, fed every batch the store's follower folds (the log in order, the store's
  own events included): events applied by kind, dispatch latency (enqueue -> first attempt created),
  finish latency (enqueue -> final status, from `RolloutFinished`) and the final reward of each finished
  rollout, by resources generation (the reward curve). Latencies are on the store's clock, the one its
  events carry.

The observer's figures start when the store process starts (the catch-up on start is not observed; the
counts from the view are whole-history). Its per-batch cost is a pass over the batch's kinds and, per
finished rollout, one read of that rollout's spans from the view to find its final reward (the spans were
just folded, so RocksDB serves them from its cache).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, Histogram, Metric, Summary
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from pydantic import BaseModel

from agl_events.algorithm.metrics import TrainerMetrics
from agl_events.emitter.reward import find_final_reward
from agl_events.events.kinds import KINDS, Kind
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.server.experiments import ExperimentStores
from agl_events.store.contract import LightningStore
from agl_events.views.disk import folder_bytes

#: Seconds from enqueue to the first attempt, or to the final status: from a busy queue's milliseconds to
#: rollouts that wait or run for many minutes.
ROLLOUT_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                           1800.0, 3600.0)


class RewardPoint(BaseModel):
    """The reward curve at one resources generation: mean final reward of the rollouts run with it."""

    generation: int | None
    mean_reward: float
    rollouts: int


class ExperimentFigures(BaseModel):
    """One experiment at a glance (what `/ui/data.json` answers). Counters are since the store process
    started; rates are the reader's business (two readings apart)."""

    experiment: str
    time: float
    healthy: bool
    rollouts_by_status: dict[str, int]
    events_applied: dict[str, int]
    consumer_lag: dict[str, int]
    view_bytes: int | None
    dead_letters: int | None
    resources_versions: int
    latest_resources_id: str | None
    trainer_step: int | None = None
    trainer_reward: float | None = None
    reward_curve: list[RewardPoint]


class _SpanAttributes(NamedTuple):
    """What `find_final_reward` reads of a span, without validating the whole span."""

    name: str
    attributes: dict[str, Any]


@dataclass
class FoldObserver:
    """The figures one experiment's folded batches give (see the module docstring)."""

    dispatch: Any  # the dispatch-latency Histogram's child for this experiment
    finish: Any  # the finish-latency Histogram, labelled by status at observation
    reward: Any  # the reward Summary's child for this experiment
    experiment: str
    view: Any  # the store's StoreView: rollouts' enqueue times and finished attempts' spans
    applied: Counter[str] = field(default_factory=Counter)
    rewards: dict[int | None, list[float]] = field(default_factory=dict)  # generation -> [sum, count]

    def __call__(self, events: list[LoggedEvent]) -> None:
        self.applied.update(e.kind for e in events)
        for event in events:
            if event.kind == Kind.ATTEMPT_CREATED:
                self._dispatched(event.record["attempt"])
            elif event.kind == Kind.ROLLOUT_FINISHED:
                self._finished(event.record)

    def _dispatched(self, attempt: Mapping[str, Any]) -> None:
        if attempt["sequence_id"] != 1:  # a retry: its wait includes the attempts before it
            return
        rollout = self.view.get(keys.rollout(attempt["rollout_id"]))
        if rollout is not None:
            self.dispatch.observe(max(attempt["start_time"] - rollout["start_time"], 0.0))

    def _finished(self, record: Mapping[str, Any]) -> None:
        rollout = record["rollout"]
        if rollout["end_time"] is not None:
            self.finish.labels(self.experiment, rollout["status"]).observe(
                max(rollout["end_time"] - rollout["start_time"], 0.0))
        attempt = record["attempt"]
        if attempt is None:
            return
        spans = self.view.spans(rollout["rollout_id"], attempt["attempt_id"])  # decoded as read: the last first
        reward = find_final_reward(spans.map(lambda s: _SpanAttributes(s["name"], s.get("attributes") or {})))
        if reward is None:
            return
        self.reward.observe(reward)
        point = self.rewards.setdefault(record["resources_generation"], [0.0, 0])
        point[0] += reward
        point[1] += 1

    def reward_curve(self) -> list[RewardPoint]:
        """Mean final reward per resources generation, in generation order (unversioned rollouts first)."""
        return [RewardPoint(generation=generation, mean_reward=total / count, rollouts=int(count))
                for generation, (total, count) in sorted(self.rewards.items(), key=lambda g: (g[0] is not None,
                                                                                             g[0] or 0))]


class StoreFigures:
    """The store metric families on `registry`, an observer per opened experiment, and both read together.

    Attach each store once it opens (`attach`); a store without a view gives only what it has (the contract's
    defaults). A `trainer` in the same process (the Trainer embeds its store server) is registered
    too, and its step and reward join its experiment's figures."""

    def __init__(self, registry: CollectorRegistry, experiments: ExperimentStores,
                 trainer: TrainerMetrics | None = None) -> None:
        self._experiments = experiments
        self._trainer = trainer
        self._observers: dict[str, FoldObserver] = {}
        self.dispatch = Histogram("agl_store_dispatch_latency_seconds", "Seconds from a rollout's enqueue to its "
                                  "first attempt (claimed by a runner or started), on the store's clock.",
                                  ["experiment"], buckets=ROLLOUT_LATENCY_BUCKETS, registry=registry)
        self.finish = Histogram("agl_store_finish_latency_seconds", "Seconds from a rollout's enqueue to its final "
                                "status, on the store's clock.", ["experiment", "status"],
                                buckets=ROLLOUT_LATENCY_BUCKETS, registry=registry)
        self.reward = Summary("agl_store_rollout_reward", "Final reward of each finished rollout (its last "
                              "attempt's last reward span); mean = rate(_sum) / rate(_count).", ["experiment"],
                              registry=registry)
        registry.register(_Collector(self))
        if trainer is not None:
            registry.register(trainer)

    def attach(self, name: str, store: LightningStore) -> None:
        view = store.view
        if view is None or name in self._observers:
            return
        observer = FoldObserver(self.dispatch.labels(name), self.finish, self.reward.labels(name), name, view)
        store.add_fold_listener(observer)
        self._observers[name] = observer

    def figures(self, name: str, store: LightningStore) -> ExperimentFigures:
        """The experiment's figures now."""
        view = store.view
        observer = self._observers.get(name)
        latest = None if view is None else view.get(keys.LATEST_RESOURCES)
        view_dir = store.view_dir
        trainer = self._trainer if self._trainer is not None and self._trainer.experiment == name else None
        return ExperimentFigures(
            experiment=name, time=time.time(), healthy=self._experiments.failure_of(name) is None,
            rollouts_by_status=store.rollouts_by_status(),
            events_applied=dict(observer.applied) if observer is not None else {},
            consumer_lag={f"{topic}/{partition}": lag for (topic, partition), lag in sorted(_lag(store).items())},
            view_bytes=None if view_dir is None else folder_bytes(view_dir),
            dead_letters=store.dead_letters_written,
            resources_versions=0 if view is None else view.get(keys.count("resources")) or 0,
            latest_resources_id=latest,
            trainer_step=None if trainer is None else trainer.step,
            trainer_reward=None if trainer is None else trainer.reward,
            reward_curve=observer.reward_curve() if observer is not None else [],
        )

    def all_figures(self) -> Iterator[ExperimentFigures]:
        for name, store in self._experiments.opened.items():
            yield self.figures(name, store)


def _lag(store: LightningStore) -> dict[tuple[str, int], int]:
    """Records in the log the view has not folded yet, per (topic, partition)."""
    view = store.view
    if view is None:
        return {}
    positions = view.positions
    return {position: max(end - positions.get(position, 0), 0) for position, end in store.log_ends().items()}


class _Collector:
    """The read-time families: each scrape asks `StoreFigures` for every opened experiment."""

    def __init__(self, figures: StoreFigures) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        rollouts = GaugeMetricFamily("agl_store_rollouts", "Rollouts the store's view holds, by status.",
                                     labels=["experiment", "status"])
        applied = CounterMetricFamily("agl_store_events_applied", "Events the store's follower folded since it "
                                      "started, by topic and kind.", labels=["experiment", "topic", "kind"])
        lag = GaugeMetricFamily("agl_store_consumer_lag", "Records in the log the store's view has not folded "
                                "yet (log end minus the view's position).", labels=["experiment", "topic",
                                                                                   "partition"])
        size = GaugeMetricFamily("agl_store_view_bytes", "Bytes of the store's RocksDB view on disk.",
                                 labels=["experiment"])
        dead = CounterMetricFamily("agl_store_dead_letters", "Records the store copied to the dead-letter topic "
                                   "since it started.", labels=["experiment"])
        versions = GaugeMetricFamily("agl_store_resources_versions", "Resources versions published (the latest "
                                     "one's generation).", labels=["experiment"])
        for figures in self._figures.all_figures():
            name = figures.experiment
            for status, count in figures.rollouts_by_status.items():
                rollouts.add_metric([name, status], count)
            for kind, count in figures.events_applied.items():
                spec = KINDS.get(kind)
                applied.add_metric([name, spec.topic.value if spec else "", kind], count)
            for where, records in figures.consumer_lag.items():
                topic, partition = where.rsplit("/", 1)
                lag.add_metric([name, topic, partition], records)
            if figures.view_bytes is not None:
                size.add_metric([name], figures.view_bytes)
            if figures.dead_letters is not None:
                dead.add_metric([name], figures.dead_letters)
            versions.add_metric([name], figures.resources_versions)
        yield from (rollouts, applied, lag, size, dead, versions)

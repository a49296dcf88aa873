"""What a store backend supplies to the event-sourced store (`store.service`): the factories in `store.memory`,
`store.kafka` and `store.readonly` fill one in; all behaviour lives in the store's parts.

A backend without a `log` writes nothing (every write is refused with `refusal`); one without a `follower`
has a view that never moves (no catch-up, no watchdog, no heartbeats; waits answer at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agl_events.log.backpressure import BackpressureStats
from agl_events.store.committer import EventLog
from agl_events.store.contract import LightningStore, LightningStoreCapabilities
from agl_events.store.follower import Follower
from agl_events.store.group import Group
from agl_events.store.partition_folds import PartitionFolds
from agl_events.store.routing import Router
from agl_events.views.store_view import StoreView


class Companion(Protocol):
    """Background work beside the store (the task-requests ingester, the store group's membership): started
    in order once the view caught up, stopped in reverse order first thing on close."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class Backend:
    view: StoreView
    producer_id: str
    log: EventLog | None = None
    follower: Follower | None = None
    #: Why writes are refused, for a backend without a log.
    refusal: str = "this store writes nothing"
    router: Router = field(default_factory=Router)
    #: In a store group, the partitions folded here move with ownership; None: the follower folds them all.
    partition_folds: PartitionFolds | None = None
    capabilities: LightningStoreCapabilities = field(default_factory=lambda: LightningStoreCapabilities(
        thread_safe=False, async_safe=True, zero_copy=True, otlp_traces=False))
    #: Built with the store, by name, from the store (its contract) and its store-group part.
    companions: Mapping[str, Callable[[LightningStore, Group], Companion]] = field(default_factory=dict)
    #: Back-pressure of the log's own queues (a Kafka producer's), beside the committer's.
    log_queues: Callable[[], dict[str, BackpressureStats]] = dict
    dead_letters: Callable[[], int] | None = None
    log_ends: Callable[[], dict[tuple[str, int], int]] = dict
    status_counts: Callable[[], dict[str, int]] = dict
    view_dir: Path | None = None
    #: Run last on close (a read-only store deletes its scratch folder).
    after_close: Callable[[], None] = lambda: None

"""A worker's per-partition views: one RocksDB folder per (topic, partition) it is assigned.

Why one view per partition rather than one per worker: a partition is the unit Kafka moves between
workers. With a view per partition, a worker that loses a partition simply closes its folder, and a
worker that gains one opens (or creates) exactly the state of that partition and knows, from the view
itself, the next offset to read. Nothing has to be split or merged on a rebalance. The view processor
keeps a StoreView per partition (`PartitionViews`), the samples processor a span buffer (`SampleBuffer`).

Folders live at `<data_dir>/<topic>/<partition>`. They are derived and disposable: delete one and the
next worker to own that partition rebuilds it from offset 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from agl_events.reducers import keys
from agl_events.views.kv import KeyValue
from agl_events.views.rocks import RocksKV
from agl_events.views.store_view import StoreView

log = logging.getLogger(__name__)

Position = tuple[str, int]  # (topic, partition)

#: The entity counters every view keeps (see `reducers.changes.Pending.create`), as stats keys.
COUNT_PREFIX = keys.count("")


class PartitionView(Protocol):
    """What a processor keeps per partition: state that knows the next offset it has to read."""

    @property
    def positions(self) -> dict[Position, int]: ...

    def close(self) -> None: ...


V = TypeVar("V", bound=PartitionView)


class PartitionStates(Generic[V]):
    """The registry of per-partition state of one worker: which partitions it holds, and their views.

    Views are opened lazily (on first use after assignment: the seek, the first event, a query) and
    closed when the partition is revoked, so a RocksDB folder is open in at most one process at a time
    as long as Kafka assigns each partition to one worker. A view is only handed out for an assigned
    partition: events or queries for anything else get None, never a freshly created folder.
    """

    def __init__(self, data_dir: Path, open_view: Callable[[Path], V]) -> None:
        self.data_dir = data_dir
        self._open_view = open_view
        self._assigned: set[Position] = set()
        self._open: dict[Position, V] = {}

    # -- assignment ---------------------------------------------------------------------------------
    @property
    def assigned(self) -> set[Position]:
        return set(self._assigned)

    def assign(self, assigned: Iterable[Position]) -> None:
        """Take the new full assignment (Kafka's eager protocol always hands out the whole set)."""
        self._assigned = set(assigned)
        for position in [p for p in self._open if p not in self._assigned]:
            self._close(position)

    def revoke(self, revoked: Iterable[Position]) -> None:
        """Give partitions up: close their views so the next owner (maybe another process) can open them."""
        for position in revoked:
            self._assigned.discard(position)
            self._close(position)

    def holds(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._assigned

    # -- views --------------------------------------------------------------------------------------
    def path(self, topic: str, partition: int) -> Path:
        return self.data_dir / topic / str(partition)

    def view(self, topic: str, partition: int) -> V | None:
        """The view of an assigned partition, opened on first use; None when it is not ours."""
        position = (topic, partition)
        if position not in self._assigned:
            return None
        view = self._open.get(position)
        if view is None:
            view = self._open_view(self.path(topic, partition))
            self._open[position] = view
            log.info("opened view %s[%d] at offset %d", topic, partition, view.positions.get(position, 0))
        return view

    def next_offset(self, topic: str, partition: int) -> int | None:
        """The offset the view of this partition has to read next (0 when empty); None when not ours."""
        view = self.view(topic, partition)
        return None if view is None else view.positions.get((topic, partition), 0)

    def positions(self, partitions: Iterable[Position]) -> dict[Position, int]:
        """Next offsets of the given partitions that are ours: where the consumer must seek to."""
        found: dict[Position, int] = {}
        for topic, partition in partitions:
            offset = self.next_offset(topic, partition)
            if offset is not None:
                found[(topic, partition)] = offset
        return found

    def close(self) -> None:
        """Close every open view (on shutdown); the assignment is forgotten too."""
        for position in list(self._open):
            self._close(position)
        self._assigned.clear()

    def _close(self, position: Position) -> None:
        view = self._open.pop(position, None)
        if view is not None:
            view.close()
            log.info("closed view %s[%d]", *position)


class PartitionViews(PartitionStates[StoreView]):
    """The view processor's partitions: each folds into a StoreView, with the store's own reducers."""

    def __init__(self, data_dir: Path, open_kv: Callable[[Path], KeyValue] = RocksKV) -> None:
        # track_own=False: a processor only ever folds what it reads back from the log.
        super().__init__(data_dir, lambda path: StoreView(open_kv(path), track_own=False))

    def stats(self) -> list[dict[str, Any]]:
        """Per assigned partition: its next offset and entity counts (`n/rollouts` etc.)."""
        out: list[dict[str, Any]] = []
        for topic, partition in sorted(self.assigned):
            view = self.view(topic, partition)
            if view is None:
                continue
            out.append({
                "topic": topic,
                "partition": partition,
                "next_offset": view.positions.get((topic, partition), 0),
                "counts": dict(view.scan(COUNT_PREFIX)),
            })
        return out


def summed_counts(stats: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Add up the `counts` of per-partition stats entries (of one worker or of several)."""
    total: dict[str, int] = {}
    for entry in stats:
        for name, value in entry["counts"].items():
            total[name] = total.get(name, 0) + int(value)
    return total

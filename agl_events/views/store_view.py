"""The store's view: folds logged events into a KeyValue, remembering how far into each partition it got."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from agl_events.events.codec import AvroCodec
from agl_events.events.kinds import spec
from agl_events.log.records import LoggedEvent, Position, ReadBatch
from agl_events.reducers import keys, reduce_explained
from agl_events.samples.generations import generations
from agl_events.topics import VIEW_TOPICS
from agl_events.views.kv import KeyValue
from agl_events.views.spans import StoredSpans, span_decoder, stored_spans

log = logging.getLogger(__name__)

#: A key after every queue entry (`keys.queue_entry`: digits), where queue scans start while the queue is empty.
_QUEUE_END = keys.QUEUE + "~"


class StoreView:
    """Applies events idempotently and answers point reads and ordered scans.

    Two ways in: `apply_own` for events this process just appended, so that a caller reads its own
    writes at once, and `fold` for batches read back from the log in order, which advances the stored
    positions and skips offsets already applied. Every reader of the log (the store's follower, a rebuild,
    a processor's partition) folds through `fold`, so positions are kept in one place, one way. When the
    reader reaches an event this process already applied, it only advances the position: folding it again
    could briefly roll the view back to an older state (a dequeued rollout back in the queue) between two
    reader batches. Such an event is known by its position, and `own_event` gives it as applied, so that a
    reader can hand it on instead of decoding its record again (the store's own events are about 9 of the
    21 records it reads back per rollout).

    After a crash the own-applied state may be ahead of the stored positions; replay from those
    positions then re-folds the same events in log order, and since reducers set values rather than
    add to them, the view ends where it was.

    Besides the reducers' totals it counts what each log partition's events created (`keys.partition_count`):
    a store of a group, whose view also holds partitions it once owned, totals only those it owns now.
    """

    def __init__(self, kv: KeyValue, track_own: bool = True,
                 on_ignored: Callable[[LoggedEvent, str], None] | None = None, codec: AvroCodec | None = None
                 ) -> None:
        """`on_ignored(event, reason)` hears of each event read from the log that named a rollout or attempt the
        view does not hold (`Pending.ignore`), once its batch is written; by default they are logged. `codec`
        decodes the spans queries read (stored in single-object framing: the project's schemas suffice)."""
        self.kv = kv
        self._track_own = track_own
        self._on_ignored = on_ignored or _log_ignored
        #: Events applied by `apply_own` and not yet read back, by position. The follower's poll thread reads it
        #: (`own_event`) while the loop changes it: single dict operations, atomic under the GIL.
        self._own_pending: dict[tuple[str, int, int], LoggedEvent] = {}
        self._positions: dict[Position, int] = {
            _position(key): value for key, value in kv.scan(keys.POSITIONS)
        }
        self._span = span_decoder(codec or AvroCodec())
        self._observers: list[Callable[[Mapping[str, Any]], None]] = []
        #: Where queue scans start: no queue entry before it is in the view. A claimed entry is deleted, and
        #: RocksDB steps over a deleted key on every scan from the queue's start until a compaction drops it:
        #: after 16,000 claims, reading the queue's head took 3.4 ms instead of microseconds.
        self._queue_from = keys.QUEUE
        #: The resources snapshots' generations, ranked on first use after each write of a snapshot (`generations`).
        self._generations: dict[str, int] | None = None

    @property
    def positions(self) -> dict[Position, int]:
        """Next offset to read per (topic, partition)."""
        return dict(self._positions)

    def get(self, key: str) -> Any:
        return self.kv.get(key)

    def scan(self, prefix: str) -> Iterator[tuple[str, Any]]:
        return self._scan_queue() if prefix == keys.QUEUE else self.kv.scan(prefix)

    def generations(self) -> Mapping[str, int]:
        """Every resources snapshot's generation (`samples.generations`): ranked again only after a snapshot was
        written, not at every finish that asks."""
        if self._generations is None:
            self._generations = generations((s["create_time"], s["resources_id"])
                                            for _, s in self.kv.scan(keys.RESOURCES))
        return self._generations

    def _scan_queue(self) -> Iterator[tuple[str, Any]]:
        """The queue, read from `_queue_from`, which moves up to the first entry read (those before it were
        all taken) or past the end when none is left; writing an entry before it moves it back (`_fold`)."""
        empty = True
        for key, value in self.kv.scan(keys.QUEUE, self._queue_from):
            if empty:
                self._queue_from, empty = key, False
            yield key, value
        if empty:
            self._queue_from = _QUEUE_END

    def on_written(self, observer: Callable[[Mapping[str, Any]], None]) -> None:
        """`observer(changes)` hears of every batch written to the view (key -> value, None: deleted) right after
        it is written: what keeps an index beside the view without scanning it (the watchdog's queue)."""
        self._observers.append(observer)

    def spans(self, rollout_id: str, attempt_id: str | None = None) -> StoredSpans[dict[str, Any]]:
        """A rollout's spans (only `attempt_id`'s, when given) in sequence order as the store's span model, each
        decoded when it is read (`views.spans`)."""
        return StoredSpans(stored_spans(self.kv.scan(keys.spans_of(rollout_id)), rollout_id, attempt_id),
                           self._span)

    def own_event(self, topic: str, partition: int, offset: int) -> LoggedEvent | None:
        """The event at this position if this process appended and applied it and the log has not given it back
        yet: what a reader of the log may hand on in place of decoding the record (safe from any thread)."""
        return self._own_pending.get((topic, partition, offset))

    def apply_own(self, events: Iterable[LoggedEvent]) -> None:
        """Fold events this process appended, unless the reader already got to them first."""
        if not self._track_own:
            self._fold(events, None)
            return
        fresh = [e for e in events if e.offset >= self._positions.get((e.topic, e.partition), 0)]
        self._fold(fresh, None)
        # Only once folded: a reader handed one of them (`own_event`) skips its decoding for a state already written.
        # Only those of topics a view reads back: the others (a task dispatched) would stay here for good.
        self._own_pending.update(((e.topic, e.partition, e.offset), e) for e in fresh
                                 if spec(e.kind).topic in VIEW_TOPICS)

    def fold(self, batch: ReadBatch) -> int:
        """Fold a batch read from the log and store how far it was read (`batch.through`) in the same write,
        so state and position never part; returns how many events were new to this view.

        Events before a partition's stored position are skipped (delivered again after a restart or a
        rebalance); positions only move forward."""
        fresh = [e for e in batch.events if e.offset >= self._positions.get((e.topic, e.partition), 0)]
        self._fold(fresh, {pos: end for pos, end in batch.through.items() if end > self._positions.get(pos, 0)})
        return len(fresh)

    def apply_logged(self, events: Iterable[LoggedEvent]) -> int:
        """Fold events read from the log, each partition read up to its last event here (see `fold`)."""
        return self.fold(ReadBatch.of(events))

    def _fold(self, events: Iterable[LoggedEvent], advanced: Mapping[Position, int] | None) -> None:
        """Reduce `events` into one write; with `advanced` (positions read to), events read back from the log:
        the ones this process applied already are only confirmed, the positions are written with the state."""
        advance = advanced is not None
        batch: dict[str, Any] = {}

        def read(key: str) -> Any:
            return batch[key] if key in batch else self.kv.get(key)

        confirmed: list[tuple[str, int, int]] = []
        ignored: list[tuple[LoggedEvent, str]] = []
        created: Counter[tuple[str, str, int]] = Counter()
        for event in events:
            if advance and (event.topic, event.partition, event.offset) in self._own_pending:
                confirmed.append((event.topic, event.partition, event.offset))
            else:
                reduced = reduce_explained(read, event.kind, event.record, event.value)
                batch.update(reduced.changes)
                for entity in reduced.created:
                    created[entity, event.topic, event.partition] += 1
                if advance and reduced.ignored is not None:
                    ignored.append((event, reduced.ignored))
        for (entity, topic, partition), more in created.items():
            key = keys.partition_count(entity, topic, partition)
            batch[key] = (read(key) or 0) + more
        for (topic, partition), end in (advanced or {}).items():
            batch[f"{keys.POSITIONS}{topic}/{partition}"] = end
        if batch:
            self.kv.write(batch)
            self._derived_written(batch)
            for observer in self._observers:
                observer(batch)
        # Only once written: a batch that raised half-way leaves positions and pending as they were, so a
        # retry folds the same events again instead of skipping them.
        self._positions.update(advanced or {})
        for position in confirmed:
            del self._own_pending[position]
        for event, reason in ignored:
            self._on_ignored(event, reason)

    def _derived_written(self, batch: Mapping[str, Any]) -> None:
        """Keep what the view derives in memory (`_queue_from`, `_generations`) in step with a write."""
        for key, value in batch.items():
            if key.startswith(keys.QUEUE):
                if value is not None and key < self._queue_from:
                    self._queue_from = key
            elif key.startswith(keys.RESOURCES):
                self._generations = None

    def close(self) -> None:
        self.kv.close()


def _log_ignored(event: LoggedEvent, reason: str) -> None:
    log.warning("%s at %s[%d]@%d changed nothing: %s", event.kind, event.topic, event.partition, event.offset,
                reason)


def _position(key: str) -> Position:
    topic, partition = key[len(keys.POSITIONS):].rsplit("/", 1)
    return topic, int(partition)

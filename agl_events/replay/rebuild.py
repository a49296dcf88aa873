"""Rebuild a store view from the log: the same reducers as the live store, folded from offset 0 (or from the
latest usable snapshot) up to a cut, into a fresh RocksDB folder.

What comes out is exactly a store's view: `agl-events store --views` can serve it and go on following the log
from its stored positions, `store --read-only` can serve it frozen, `replay verify` compares it with a live one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agl_events.config import Settings
from agl_events.log.clients import Consumer, make_consumer
from agl_events.log.offsets import watermarks
from agl_events.log.reader import EventReader
from agl_events.log.records import Position
from agl_events.log.registry import codec_for
from agl_events.reducers import keys
from agl_events.replay.cut import Cut, CutSpec
from agl_events.replay.scan import HISTORY_CONSUMER, read_so_far, scan
from agl_events.replay.snapshot import Snapshot, list_snapshots, restore, usable
from agl_events.topics import FOREVER, LAYOUT, VIEW_TOPICS, topic_name
from agl_events.views.rocks import RocksKV
from agl_events.views.store_view import StoreView

log = logging.getLogger(__name__)

#: Progress callback: (records passed, records to pass).
ProgressCallback = Callable[[int, int], None]


class HistoryGone(RuntimeError):
    """The log no longer holds records a rebuild needs (retention or pruning deleted them)."""


@dataclass(frozen=True)
class Rebuilt:
    """What a rebuild did."""

    path: Path
    cut: Cut
    snapshot: Snapshot | None
    records: int  # records between the start (0 or the snapshot) and the cut, decodable or not
    folded: int  # events the fold applied
    seconds: float

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("inf")


def rebuild(settings: Settings, to: Path, spec: CutSpec | None = None, *, snapshots: Path | None = None,
            progress: ProgressCallback | None = None) -> Rebuilt:
    """Fold `settings.experiment`'s log up to `spec`'s cut into the empty folder `to`.

    With `snapshots` (a snapshot root), the latest snapshot within the cut is the starting point."""
    if to.exists() and any(to.iterdir()):
        raise FileExistsError(f"{to} is not empty: rebuild into a new folder (or delete that one)")
    experiment, bootstrap = settings.experiment, settings.bootstrap_servers
    codec = codec_for(settings.schema_registry_url)
    reader = EventReader(bootstrap, experiment, codec, VIEW_TOPICS, fold_only=True, **HISTORY_CONSUMER)
    meta = make_consumer(bootstrap)
    try:
        cut = (spec or CutSpec()).resolve(meta, codec, experiment, reader.partitions())
        snapshot = usable(list_snapshots(snapshots, experiment), cut.positions) if snapshots else None
        if snapshot is not None:
            restore(snapshot, to)
        view = StoreView(RocksKV(to), track_own=False)
        try:
            start = view.positions
            _check_available(settings, meta, start, cut)
            reader.assign(start)
            total, started, folded = read_so_far(cut.positions, start, cut.positions), time.perf_counter(), 0
            for batch in scan(reader, cut.positions):
                folded += view.fold(batch)
                if progress is not None:
                    progress(read_so_far(view.positions, start, cut.positions), total)
            seconds = time.perf_counter() - started
            view.kv.write({keys.REPLAY: {"experiment": experiment, "cut": cut.model_dump(),
                                         "snapshot": None if snapshot is None else str(snapshot.path)}})
        finally:
            view.close()
    finally:
        reader.close()
        meta.close()
    log.info("rebuilt %s %s: %d records in %.1f s", experiment, cut.why, total, seconds)
    return Rebuilt(to, cut, snapshot, total, folded, seconds)


def _check_available(settings: Settings, meta: Consumer, start: dict[Position, int], cut: Cut) -> None:
    """Refuse a rebuild that would silently miss history: a kept-forever topic whose log now starts after the
    rebuild's start. Topics with a retention (workers: a week of liveness) are short by design: a warning."""
    forever = {topic_name(settings.experiment, spec.topic) for spec in LAYOUT
               if spec.config.get("retention.ms") == FOREVER and spec.config.get("cleanup.policy") == "delete"}
    needed = [pos for pos, end in cut.positions.items() if end > start.get(pos, 0)]
    for (topic, partition), (low, _) in watermarks(meta, needed).items():
        if low <= start.get((topic, partition), 0):
            continue
        message = (f"{topic}[{partition}] now starts at offset {low}: retention or pruning deleted the records "
                   f"before it, which this rebuild needs from offset {start.get((topic, partition), 0)}")
        if topic in forever:
            raise HistoryGone(f"{message}. Rebuild from a snapshot that covers them (`agl-events replay "
                              "snapshot list`), or with a cut after them.")
        log.warning("%s (kept for a limited time by design; the view holds what is left)", message)

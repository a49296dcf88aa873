"""Reading a stretch of the log: from where a reader stands up to a cut, in bounded batches."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from agl_events.log.records import Position, ReadBatch, reached
from agl_events.log.source import LogSource, read_batch

#: Records per batch: what one fold step holds in memory, whatever the history's length.
BATCH_RECORDS = 2000
#: Consumer settings for reading history as fast as it folds: large fetches, and a prefetch queue of 16 MB
#: rather than librdkafka's 64 MB default, which a long history fills (an export's peak RSS grew by 100 MB
#: from a 10k- to a 100k-span history with the default, measured; bounded, but needlessly).
HISTORY_CONSUMER = {"fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 16384,
                    "max.partition.fetch.bytes": 4 * 1024 * 1024}


def scan(source: LogSource, cut: Mapping[Position, int], max_records: int = BATCH_RECORDS,
         timeout: float = 0.05) -> Iterator[ReadBatch]:
    """Batches of the events before `cut` (partition -> end offset), in offset order per partition, each with
    how far it read (never past the cut: what a view folding it stores as its positions).

    Records a partition holds past its cut (the log goes on while a replay reads) are dropped; so are those of
    partitions the cut does not name. Batches may come without events (undecodable records, a quiet fetch).
    A poll waits its whole `timeout` unless `max_records` come, so a short one costs nothing while records flow
    and ends the last poll, at the cut, quickly."""
    while not reached(source.positions, cut):
        yield read_batch(source, max_records, timeout).clipped(cut)


def read_so_far(positions: Mapping[Position, int], start: Mapping[Position, int], cut: Mapping[Position, int]
                ) -> int:
    """How many of the records between `start` and `cut` a reader at `positions` has passed: for progress."""
    return sum(max(0, min(positions.get(pos, 0), end) - start.get(pos, 0)) for pos, end in cut.items())

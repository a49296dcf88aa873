"""The log as a reader of it sees it: records in order per partition, and how far it has read.

Backend-neutral: Kafka's `EventReader` and the in-memory log's reader both are one, so the store's follower, a
rebuild and an export read either the same way, and fold what they read through `StoreView.fold`.
"""

from __future__ import annotations

from typing import Protocol

from agl_events.log.records import LoggedEvent, Position, ReadBatch
from agl_events.topics import Topic


class LogSource(Protocol):
    """A reader of some partitions of the log, read by one caller at a time."""

    def name_of(self, topic: Topic) -> str:
        """The name this log gives `topic` (Kafka prefixes the experiment)."""
        ...

    def poll(self, max_records: int, timeout: float) -> list[LoggedEvent]:
        """Up to `max_records` events, within about `timeout` (may wait it out when fewer come). Blocking."""
        ...

    def end_offsets(self, timeout: float = 30.0, topic: str | None = None) -> dict[Position, int]:
        """Where each partition (of `topic`) ends now: the offset of the next append. Blocking."""
        ...

    @property
    def positions(self) -> dict[Position, int]:
        """Next offset to read per partition: past undecodable records and a partition's empty end too."""
        ...

    def close(self) -> None:
        """Release the connection; no poll may be running."""
        ...


def read_batch(source: LogSource, max_records: int, timeout: float) -> ReadBatch:
    """One poll of `source` with how far it read: its positions right after the poll, which the caller (the
    only one polling it) may store with the batch's state. Blocking."""
    events = source.poll(max_records, timeout)
    return ReadBatch(events, source.positions)

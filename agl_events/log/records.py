"""What goes into the log and what comes out of it."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agl_events.events.codec import AvroCodec, Decoded
from agl_events.events.kinds import Kind, spec
from agl_events.events.typed import SPAN_FOLD_FIELDS
from agl_events.topics import Topic


class _EventIds:
    """Event ids: a random prefix drawn once per process (and again in a forked child) and a counter, as 32 hex
    digits like the uuid4 hex they replace. As unique as uuid4 in practice (64 random bits tell processes apart, the
    counter the events of one), for a fraction of the CPU: uuid4 reads os.urandom for every id, and a runner writes
    an event per span (~1.6 against ~0.2 us an id)."""

    def __init__(self) -> None:
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._counter = itertools.count()  # next() is atomic under the GIL: threads never share an id

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):016x}"


_EVENT_IDS = _EventIds()


def new_event_id() -> str:
    """A new event id, unique across processes (see `_EventIds`)."""
    return _EVENT_IDS.next()


@dataclass(frozen=True)
class NewEvent:
    """An event decided by a command, not yet in the log. `record` holds the schema's fields."""

    kind: str
    key: str
    record: dict[str, Any]

    @property
    def topic(self) -> Topic:
        return spec(self.kind).topic


@dataclass(frozen=True)
class EncodedEvent:
    """A NewEvent with the bytes the log stores for it, encoded once, when it was decided."""

    new: NewEvent
    value: bytes


def event(kind: str, key: str, time: float, producer_id: str, **fields: Any) -> NewEvent:
    """Build a NewEvent with the header every schema carries (event id, decision time, producer)."""
    return NewEvent(kind, key, {"event_id": new_event_id(), "time": time, "producer_id": producer_id, **fields})


@dataclass(frozen=True)
class LoggedEvent:
    """An event as it sits in the log: decoded, with its position. The position makes replay idempotent.

    `value` is the record's bytes in single-object framing (`AvroCodec.portable`: decodable with no registry),
    None where unknown: a view keeps a span as these bytes. A SpanAdded read for folding only
    (`decode_record(..., fold_only=True)`) has a `record` of the event's header and the span's keys
    (`SPAN_FOLD_FIELDS`), not the whole span: its `value` holds the rest."""

    kind: str
    key: str | None
    record: dict[str, Any]
    topic: str
    partition: int
    offset: int
    headers: dict[str, bytes] = field(default_factory=dict)
    value: bytes | None = None


Position = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class RawRecord:
    """A record as a consumer got it, undecoded: what decoding reads and what the dead-letter path copies.

    Every reader (the store's, the ingester, the processor's faust stream, the DLQ listing) hands this on
    instead of its client's message type, so nothing outside `agl_events.log` sees confluent-kafka."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes] = field(default_factory=dict)
    #: The record's timestamp (CreateTime), milliseconds since the epoch; 0 where the client gives none.
    timestamp_ms: int = 0

    @property
    def position(self) -> Position:
        return self.topic, self.partition


def decode_record(codec: AvroCodec, raw: RawRecord, *, fold_only: bool = False) -> LoggedEvent:
    """A consumed record as an event at its position; raises CodecError when it cannot be decoded.

    `fold_only`: for a reader that only folds the event into a view (the store's follower, a rebuild), a
    SpanAdded is read as far as its keys (`AvroCodec.leading`): decoding a whole span was a quarter of a
    store's CPU, for a span the view stores as its bytes anyway. A span whose writer schema does not lead with
    its keys is decoded in full. Only the leading fields are checked: a span corrupt past them is stored as it is
    and fails when a query decodes it, where a full decode would have dead-lettered it."""
    value = codec.portable(raw.value or b"")
    keys = codec.leading(value, Kind.SPAN_ADDED, SPAN_FOLD_FIELDS) if fold_only and value is not None else None
    decoded = codec.decode(raw.value or b"") if keys is None else Decoded(Kind.SPAN_ADDED, keys)
    return LoggedEvent(decoded.name, raw.key.decode() if raw.key else None, decoded.record, raw.topic,
                       raw.partition, raw.offset, dict(raw.headers), value)


@dataclass(frozen=True)
class ReadBatch:
    """What one read of the log gave: the events decoded, and how far each partition was read.

    `through` is the next offset to read per partition once this batch is folded; it can be past the last
    event's offset (an undecodable record dead-lettered, the end of a partition, offsets compaction emptied),
    and it is what a view stores as its position, in the same write as the batch's state."""

    events: list[LoggedEvent]
    through: dict[Position, int]

    @classmethod
    def of(cls, events: Iterable[LoggedEvent]) -> ReadBatch:
        """Events read with nothing between them: each partition read up to its last event here."""
        listed = list(events)
        through: dict[Position, int] = {}
        for e in listed:
            through[(e.topic, e.partition)] = max(through.get((e.topic, e.partition), 0), e.offset + 1)
        return cls(listed, through)

    def clipped(self, cut: Mapping[Position, int]) -> ReadBatch:
        """Only what lies before `cut` (partition -> end offset): partitions it does not name are dropped."""
        return ReadBatch([e for e in self.events if e.offset < cut.get((e.topic, e.partition), 0)],
                         {pos: min(end, cut[pos]) for pos, end in self.through.items() if pos in cut})


def reached(positions: Mapping[Position, int], targets: Mapping[Position, int]) -> bool:
    """Whether `positions` (next offsets to read) are at or past every target offset."""
    return all(positions.get(pos, 0) >= end for pos, end in targets.items())

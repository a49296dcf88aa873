"""Where a replay stops: per partition, the offset past the last record it folds.

A cut is how "the store as it was at T" or "when resources R were published" becomes something a reader can
read up to. Kafka stamps every record (CreateTime, the producer's clock at append), and the broker finds the
first offset stamped at or after a time in each partition, so a time cut holds exactly the records appended
before that time. A resources cut is the time cut at the record that published those resources, plus that
record itself: records on other partitions stamped in the same millisecond count as before it.
A cut is plain data: `--offsets FILE` reads one written by `Cut.save` (or by hand, `{"topic/partition": offset}`).
"""

from __future__ import annotations

import json
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, model_validator

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.events.kinds import Kind
from agl_events.log.clients import Consumer
from agl_events.log.offsets import offsets_at, read_to_end, watermarks
from agl_events.log.records import Position, decode_record
from agl_events.topics import Topic, topic_name

#: Kinds that carry a resources snapshot (the first of them for an id is its publication).
RESOURCES_KINDS = (Kind.RESOURCES_PUBLISHED, Kind.RESOURCES_UPDATED)


class Cut(BaseModel):
    """End offsets per partition, keyed `topic/partition` (JSON-friendly), and what they stand for."""

    ends: dict[str, int]
    #: What the cut stands for, read after "up to" ("the log's end at ...", "the publication of resources ...").
    why: str = "given offsets"

    @classmethod
    def of(cls, ends: dict[Position, int], why: str) -> Cut:
        return cls(ends={f"{t}/{p}": end for (t, p), end in ends.items()}, why=why)

    @property
    def positions(self) -> dict[Position, int]:
        out: dict[Position, int] = {}
        for key, end in self.ends.items():
            topic, _, partition = key.rpartition("/")
            out[(topic, int(partition))] = end
        return out

    @property
    def total(self) -> int:
        return sum(self.ends.values())

    def save(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=2))

    @classmethod
    def load(cls, path: Path) -> Cut:
        """A cut file: this model's JSON, or a bare `{"topic/partition": offset}` mapping."""
        data = json.loads(path.read_text())
        return cls.model_validate(data if "ends" in data else {"ends": data, "why": f"the offsets in {path}"})


def log_end(consumer: Consumer, partitions: list[Position]) -> Cut:
    """Everything acknowledged so far."""
    ends = {pos: high for pos, (_, high) in watermarks(consumer, partitions).items()}
    return Cut.of(ends, f"the log's end at {_stamp(datetime.now(UTC).timestamp())}")


def until_time(consumer: Consumer, partitions: list[Position], when: float) -> Cut:
    """The records stamped at or before `when` (seconds since the epoch)."""
    return Cut.of(offsets_at(consumer, partitions, int(when * 1000) + 1), f"the records stamped by {_stamp(when)}")


def until_resources(consumer: Consumer, codec: AvroCodec, partitions: list[Position], resources_topic: str,
                    resources_id: str) -> Cut:
    """Everything up to and including the record that published `resources_id`.

    The resources topic is compacted: once a later update of the same id has replaced its publication, the
    earliest record left for the id is that update, and the cut falls there (documented in docs/replay.md)."""
    found = _first_resources_record(consumer, codec, resources_topic, resources_id)
    if found is None:
        raise LookupError(f"no resources {resources_id!r} in {resources_topic}")
    position, offset, stamp_ms = found
    ends = offsets_at(consumer, [p for p in partitions if p != position], stamp_ms + 1)
    if position in partitions:
        ends[position] = offset + 1
    return Cut.of(ends, f"the publication of resources {resources_id} ({_stamp(stamp_ms / 1000)})")


def _first_resources_record(consumer: Consumer, codec: AvroCodec, topic: str, resources_id: str
                            ) -> tuple[Position, int, int] | None:
    """(partition, offset, timestamp ms) of the first record holding `resources_id`, read with `consumer`."""
    with closing(read_to_end(consumer, [topic])) as records:  # found early: unassigns the consumer at once
        for record in records:
            try:
                event = decode_record(codec, record)
            except CodecError:
                continue
            if event.kind in RESOURCES_KINDS and event.record["resources"]["resources_id"] == resources_id:
                return record.position, record.offset, record.timestamp_ms
    return None


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def parse_time(text: str) -> float:
    """`--until` values: seconds since the epoch, or an ISO 8601 time (UTC unless it says otherwise)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither seconds since the epoch nor an ISO 8601 time "
                         "(e.g. 2026-12-05T10:30:00)") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


#: Units of `parse_duration`, in seconds.
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """`--keep-spans-for` values: seconds, or a number with a unit (90s, 30m, 12h, 7d, 2w)."""
    number, unit = (text[:-1], text[-1]) if text[-1:] in DURATION_UNITS else (text, "s")
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except ValueError:
        raise ValueError(f"{text!r} is not a duration (seconds, or a number with s, m, h, d or w: 7d)") from None
    if seconds < 0:
        raise ValueError(f"{text!r} is negative")
    return seconds


class CutSpec(BaseModel):
    """Which cut a command asks for: at most one of a time, a resources id, an offsets file; none is the log end."""

    until: float | None = None
    until_resources: str | None = None
    offsets: Path | None = None

    @model_validator(mode="after")
    def _one_at_most(self) -> CutSpec:
        given = [name for name in ("until", "until_resources", "offsets") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of --until, --until-resources, --offsets, not {' and '.join(given)}")
        return self

    def resolve(self, consumer: Consumer, codec: AvroCodec, experiment: str, partitions: list[Position]) -> Cut:
        if self.until is not None:
            return until_time(consumer, partitions, self.until)
        if self.until_resources is not None:
            return until_resources(consumer, codec, partitions, topic_name(experiment, Topic.RESOURCES),
                                   self.until_resources)
        if self.offsets is not None:
            return Cut.load(self.offsets)
        return log_end(consumer, partitions)

"""The samples processor's state of one span partition: spans waiting for their rollout to finish.

The span topic alone is enough to build samples: the store appends `RolloutFinished` to a rollout's span
partition only after every span its runner reported, so in that partition the spans of an attempt come
before the marker. A partition's state therefore holds, in one key space written one batch at a time:

    b/<rollout>/<attempt>/<sequence id>/<offset>  a buffered span (the Span's JSON), in sequence order
    d/<rollout>/<attempt or ->                    that attempt was sampled (or dead-lettered): its sample id
    meta/pos/<topic>/<partition>                  the next offset to read
    meta/n/buffered, meta/n/sampled               counters for the stats page

`fold` is the state machine: (state, events) -> (changes, finished rollouts), nothing written; `commit`
writes the changes and the new position in one batch, which the processor does only once the samples
of the finished rollouts are durable. A crash in between re-reads the same events from the old
position and builds the same samples again (same ids: consumers dedupe); a crash after it never sees
them again. Either way a sampled attempt's later spans and repeated markers are ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agl_events.events.convert import span_from_record
from agl_events.events.kinds import Kind
from agl_events.log.records import LoggedEvent, Position
from agl_events.samples.model import Sample, sample_id
from agl_events.types import Span
from agl_events.views.kv import KeyValue

log = logging.getLogger(__name__)

BUFFERED = "b/"
SAMPLED = "d/"
POSITIONS = "meta/pos/"
N_BUFFERED = "meta/n/buffered"
N_SAMPLED = "meta/n/sampled"

#: Builds the sample of a RolloutFinished record from its attempt's spans (`build.build_sample` with the
#: adapter bound); may raise, which makes the rollout a dead letter.
Build = Callable[[Mapping[str, Any], Sequence[Span]], Sample]


def buffered(rid: str, aid: str, sequence_id: int, offset: int) -> str:
    return f"{BUFFERED}{rid}/{aid}/{sequence_id:016d}/{offset:016d}"


def buffered_of(rid: str, aid: str | None = None) -> str:
    """Prefix of the spans buffered for one attempt, or for every attempt of the rollout."""
    return f"{BUFFERED}{rid}/" if aid is None else f"{BUFFERED}{rid}/{aid}/"


def sampled(rid: str, aid: str | None) -> str:
    return f"{SAMPLED}{rid}/{aid or '-'}"


def position(topic: str, partition: int) -> str:
    return f"{POSITIONS}{topic}/{partition}"


@dataclass(frozen=True)
class Finished:
    """A rollout attempt whose RolloutFinished was folded: its sample, or why none could be built."""

    event: LoggedEvent
    sample_id: str
    sample: Sample | None
    error: Exception | None = None


@dataclass
class Folded:
    """What folding a partition's events decided; nothing is written until `SampleBuffer.commit`."""

    position: Position
    start: int
    end: int
    changes: dict[str, Any] = field(default_factory=dict)
    finished: list[Finished] = field(default_factory=list)
    #: Spans of an attempt already sampled: ignored (logged).
    late_spans: int = 0
    #: RolloutFinished for an attempt already sampled (the rollout left and re-entered a final status).
    repeated: int = 0
    #: Events below the stored position (delivered again): skipped.
    redelivered: int = 0


class _Overlay:
    """The state as the fold in progress has changed it: reads see its own writes first.

    Its writes are indexed by their first two key segments (`b/<rollout>/`), so that scanning a rollout's
    spans at its marker looks at that rollout's writes only, not at the whole batch's.
    """

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv
        self.changes: dict[str, Any] = {}
        self._groups: dict[str, set[str]] = {}

    def get(self, key: str) -> Any:
        return self.changes[key] if key in self.changes else self.kv.get(key)

    def put(self, key: str, value: Any) -> None:
        self.changes[key] = value
        self._groups.setdefault(_group(key), set()).add(key)

    def add(self, key: str, delta: int) -> None:
        self.put(key, (self.get(key) or 0) + delta)

    def scan(self, prefix: str) -> list[tuple[str, Any]]:
        """Entries under `prefix` (at least two segments deep, e.g. `b/<rollout>/`), in key order."""
        found = dict(self.kv.scan(prefix))
        found.update((key, self.changes[key]) for key in self._groups.get(_group(prefix), ()) if key.startswith(prefix))
        return sorted((key, value) for key, value in found.items() if value is not None)

    def delete_prefix(self, prefix: str) -> int:
        keys = [key for key, _ in self.scan(prefix)]
        for key in keys:
            self.put(key, None)
        return len(keys)


def _group(key: str) -> str:
    first = key.find("/")
    second = key.find("/", first + 1)
    return key if second < 0 else key[:second + 1]


class SampleBuffer:
    """One span partition's samples state in a KeyValue (RocksDB in the processor, a dict in tests)."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv
        self._positions: dict[Position, int] = {_parse_position(key): value for key, value in kv.scan(POSITIONS)}

    @property
    def positions(self) -> dict[Position, int]:
        """Next offset to read per (topic, partition): where the consumer seeks on assignment."""
        return dict(self._positions)

    def fold(self, topic: str, partition: int, events: Sequence[LoggedEvent], through: int, build: Build
             ) -> Folded:
        """Decide what `events` (one partition's, in offset order) change; `through` is the offset past the
        last record consumed, decoded or not, so that a dead-lettered record is not read again."""
        start = self._positions.get((topic, partition), 0)
        state = _Overlay(self.kv)
        folded = Folded((topic, partition), start, start)
        for event in events:
            if event.offset < start:
                folded.redelivered += 1
                continue
            if event.kind == Kind.SPAN_ADDED:
                self._buffer(state, event, folded)
            elif event.kind == Kind.ROLLOUT_FINISHED:
                self._finish(state, event, build, folded)
            # SpanSequenceReserved (and kinds to come) hold nothing a sample needs.
            folded.end = max(folded.end, event.offset + 1)
        folded.end = max(folded.end, through)
        if folded.end > start:
            state.put(position(topic, partition), folded.end)
        folded.changes = state.changes
        return folded

    def commit(self, folded: Folded) -> None:
        """Write a fold's changes and position in one batch; it must be the last fold of that partition."""
        if self._positions.get(folded.position, 0) != folded.start:
            raise RuntimeError(f"stale fold of {folded.position}: it started at {folded.start}, the state "
                               f"is at {self._positions.get(folded.position, 0)}")
        if folded.changes:
            self.kv.write(folded.changes)
        self._positions[folded.position] = folded.end

    def stats(self) -> dict[str, int]:
        return {"buffered_spans": self.kv.get(N_BUFFERED) or 0, "sampled": self.kv.get(N_SAMPLED) or 0}

    def close(self) -> None:
        self.kv.close()

    @staticmethod
    def _buffer(state: _Overlay, event: LoggedEvent, folded: Folded) -> None:
        span = span_from_record(event.record["span"])
        rid, aid = span["rollout_id"], span["attempt_id"]
        if state.get(sampled(rid, aid)) is not None:
            folded.late_spans += 1
            log.warning("span %s of rollout %s attempt %s arrived after the attempt was sampled; ignored",
                        span["sequence_id"], rid, aid)
            return
        state.put(buffered(rid, aid, span["sequence_id"], event.offset), span)
        state.add(N_BUFFERED, 1)

    @staticmethod
    def _finish(state: _Overlay, event: LoggedEvent, build: Build, folded: Folded) -> None:
        rid = event.record["rollout"]["rollout_id"]
        attempt = event.record["attempt"]
        aid = None if attempt is None else attempt["attempt_id"]
        if state.get(sampled(rid, aid)) is not None:
            folded.repeated += 1
            return
        spans = [] if aid is None else [Span.model_validate(v) for _, v in state.scan(buffered_of(rid, aid))]
        sid = sample_id(rid, aid)
        try:
            folded.finished.append(Finished(event, sid, build(event.record, spans)))
        except Exception as exc:  # the adapter's (or the rollout's) fault: a dead letter, not a stop
            folded.finished.append(Finished(event, sid, None, exc))
        # Spans of earlier attempts will never make a sample: the marker names the latest attempt.
        state.add(N_BUFFERED, -state.delete_prefix(buffered_of(rid)))
        state.put(sampled(rid, aid), {"sample_id": sid, "offset": event.offset})
        state.add(N_SAMPLED, 1)


def _parse_position(key: str) -> Position:
    topic, partition = key[len(POSITIONS):].rsplit("/", 1)
    return topic, int(partition)

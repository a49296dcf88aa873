"""The in-memory log: a list per topic, for the in-memory store and for tests of whatever writes to the log.

It is an `EventSink` (what the store's committer, the tracer and the proxy's recorder write to) and its reader a
`LogSource` (what the follower folds), so those run without a broker exactly as they run on Kafka.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence

from agl_events.events.codec import AvroCodec
from agl_events.log.encoding import encode_event
from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent, Position
from agl_events.log.sink import AppendError, Delivered
from agl_events.topics import Topic


class InMemoryLog:
    """One partition per topic, named by the topic's suffix. Records are encoded (within the same size limit)
    and decoded through the real codec so that anything the Kafka backend would reject is rejected here too.
    Appends come from the event loop, reads from the follower's thread: a condition guards the lists and wakes
    the reader."""

    def __init__(self, codec: AvroCodec | None = None, producer_id: str = "memory") -> None:
        self.codec = codec or AvroCodec()
        self.producer_id = producer_id
        self.topics: dict[str, list[LoggedEvent]] = {}
        self._changed = threading.Condition()

    def append_now(self, events: Sequence[NewEvent]) -> list[LoggedEvent]:
        """Append and return the events as logged, as any producer would (a test playing a runner)."""
        return self._append([EncodedEvent(new, self.encode(new)) for new in events])

    def _append(self, events: Sequence[EncodedEvent]) -> list[LoggedEvent]:
        decoded = [(e.new, self.codec.decode(e.value).record, e.value) for e in events]
        logged = []
        with self._changed:
            for new, record, value in decoded:
                entries = self.topics.setdefault(new.topic.value, [])
                entry = LoggedEvent(new.kind, new.key, record, new.topic.value, 0, len(entries), value=value)
                entries.append(entry)
                logged.append(entry)
            self._changed.notify_all()
        return logged

    def encode(self, new: NewEvent) -> bytes:
        return encode_event(self.codec, new)

    def append(self, events: Sequence[EncodedEvent]) -> asyncio.Future[list[LoggedEvent]]:
        """The store's EventLog: durable (in this process) as soon as it returns."""
        done: asyncio.Future[list[LoggedEvent]] = asyncio.get_running_loop().create_future()
        done.set_result(self._append(events))
        return done

    def send(self, events: Sequence[EncodedEvent], on_delivery: Callable[[Delivered | AppendError], None]) -> None:
        """Append now (decoded from its bytes, as Kafka's readers would); `on_delivery` hears where each event was
        logged before this returns."""
        for logged in self._append(events):
            on_delivery(Delivered(logged.partition, logged.offset))

    def flush(self, timeout: float = 30.0) -> None:
        """Nothing to send: appends are complete when they return."""

    def close(self) -> None:
        """Nothing to flush: appends are complete when they return."""

    def reader(self) -> InMemoryReader:
        return InMemoryReader(self)

    def read(self, positions: Mapping[Position, int], max_records: int, timeout: float) -> list[LoggedEvent]:
        """Up to `max_records` events past `positions`, waiting at most `timeout` for the first one."""
        def unread() -> list[LoggedEvent]:
            return [e for name, entries in self.topics.items() for e in entries[positions.get((name, 0), 0):]]

        with self._changed:
            self._changed.wait_for(unread, timeout)
            return unread()[:max_records]

    def ends(self, topic: str | None = None) -> dict[Position, int]:
        with self._changed:
            return {(name, 0): len(entries) for name, entries in self.topics.items() if topic in (None, name)}


class InMemoryReader:
    """A LogSource over an InMemoryLog, reading every topic from the beginning."""

    def __init__(self, log: InMemoryLog) -> None:
        self._log = log
        self._positions: dict[Position, int] = {}

    def name_of(self, topic: Topic) -> str:
        return topic.value

    def poll(self, max_records: int, timeout: float) -> list[LoggedEvent]:
        batch = self._log.read(self._positions, max_records, timeout)
        for event in batch:
            self._positions[(event.topic, 0)] = event.offset + 1
        return batch

    def end_offsets(self, timeout: float = 30.0, topic: str | None = None) -> dict[Position, int]:
        return self._log.ends(topic)

    @property
    def positions(self) -> dict[Position, int]:
        return dict(self._positions)

    def close(self) -> None:
        pass

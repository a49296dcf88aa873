"""What writers to the log are to their callers: Kafka's `EventWriter` and the in-memory log (`log.memory`) are
both, so the store's committer, the tracer and the LLM proxy's recorder run, and are tested, on either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, Protocol

from agl_events.events.codec import AvroCodec
from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent


class AppendError(RuntimeError):
    """The log refused or lost an append; nothing was acknowledged for that event."""


class Delivered(NamedTuple):
    """Where an event `EventSink.send` queued was logged: all its sender learns of it (the tracer keeps, per
    attempt, the offset past its last span), for the cost of a tuple on the delivery thread, per span."""

    partition: int
    offset: int


class EventLog(Protocol):
    """Where the store's decided events become durable (`store.committer`)."""

    def encode(self, new: NewEvent) -> bytes:
        """The bytes the log stores for `new`; raises for an event it cannot take (off its schema, too large)."""
        ...

    def append(self, events: Sequence[EncodedEvent]) -> Awaitable[list[LoggedEvent]]:
        """Queue `events` at once, in call order (or raise if the log refuses them at once); the result resolves
        to them as logged only when every one is acknowledged."""
        ...

    def close(self) -> None:
        """Flush what is pending (bounded), then release the connection. Blocking."""
        ...


class EventSink(EventLog, Protocol):
    """A process's writer, as span writers use it (the tracer streams, the proxy's recorder appends)."""

    @property
    def producer_id(self) -> str:
        """Who writes: the `producer_id` every event of this writer carries."""
        ...

    @property
    def codec(self) -> AvroCodec:
        """The codec the log's records are framed and decoded with: a writer that encodes an event's Avro body
        itself (the tracer's spans) puts this codec's frame before it (`AvroCodec.header`)."""
        ...

    def send(self, events: Sequence[EncodedEvent], on_delivery: Callable[[Delivered | AppendError], None]) -> None:
        """Queue `events` (each encoded by `encode`, or written in `codec`'s frame and checked by
        `log.encoding.checked`) and return; `on_delivery` hears of each once logged (where) or lost (an
        AppendError), on any thread, whether or not anyone calls `flush`. Raises for an event the log refuses at
        once (those before it may still be logged)."""
        ...

    def flush(self, timeout: float = 30.0) -> None:
        """Send what is queued now and serve the delivery callbacks, for at most `timeout` seconds. Blocking."""
        ...

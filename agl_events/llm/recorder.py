"""Where a proxied call's spans go: sequence ids from the store, spans straight to the span topic.

The store hands out the call's sequence id (as upstream's proxy asks per request), so proxy spans and
the runner's interleave in one order per rollout: a reward the agent records after a call is numbered after
it, a call made after a reward after the reward, which is how upstream's `LlmProxyTraceToTriplet` gives each
reward to its call. A block of ids per attempt, as a runner's claim takes, would save those calls but number
every later call below the runner's spans in between (the proxy cannot see them), so each call still takes
one id, while the backend works. The spans themselves skip the store: they are appended
to the span topic, keyed by rollout id like every span, and the proxy waits for Kafka's acknowledgement
(acks=all) before it answers the agent, so by the time the runner reports the attempt finished every
call it made is in the rollout's span partition. Attempts are checked once (then remembered), by the first
call's reservation itself (the store refuses ids for an attempt it does not have), so a mistyped rollout path
is refused instead of filling the log with spans nobody can find, without a round trip of its own.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from agl_events.log.records import EncodedEvent, LoggedEvent
from agl_events.log.sink import EventSink
from agl_events.server.client import StoreClient
from agl_events.tracer.kafka import span_event, with_route


class UnknownAttemptError(LookupError):
    """The request's rollout path names an attempt the store does not have."""


class SpanRecorder:
    def __init__(self, store: StoreClient, writer: EventSink, *, remembered_attempts: int = 10_000) -> None:
        self.store = store
        self.writer = writer
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._remembered = remembered_attempts

    async def check_attempt(self, rollout_id: str, attempt_id: str) -> int | None:
        """Raise UnknownAttemptError unless the store has this attempt. Asked once per attempt, by reserving its
        first call's sequence id (returned; None for an attempt seen before)."""
        key = (rollout_id, attempt_id)
        if key in self._known:
            self._known.move_to_end(key)
            return None
        try:
            first = await self.store.next_span_sequence_id(rollout_id, attempt_id, check_attempt=True)
        except ValueError as exc:
            raise UnknownAttemptError(f"rollout {rollout_id!r} has no attempt {attempt_id!r} ({exc})") from exc
        self._known[key] = None
        if len(self._known) > self._remembered:
            self._known.popitem(last=False)
        return first

    async def reserve(self, rollout_id: str, attempt_id: str, checked: int | None = None) -> int:
        """The call's sequence id: the one the attempt's check reserved, else the store's next."""
        return checked if checked is not None else await self.store.next_span_sequence_id(rollout_id, attempt_id)

    async def record(self, spans: list[dict[str, Any]]) -> list[LoggedEvent]:
        """Append the spans (JSON shape of our Span) and return once Kafka acknowledged every one."""
        events = [span_event(with_route(span), self.writer.producer_id) for span in spans]
        return await self.writer.append([EncodedEvent(e, self.writer.encode(e)) for e in events])

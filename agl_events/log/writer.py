"""Appending events durably: a call returns only once Kafka has acknowledged every event (acks=all)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from confluent_kafka import KafkaError, Message

from agl_events.events.codec import AvroCodec
from agl_events.log.backpressure import Backpressure
from agl_events.log.clients import make_producer
from agl_events.log.encoding import encode_event
from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent
from agl_events.log.sink import AppendError, Delivered
from agl_events.topics import topic_name

log = logging.getLogger(__name__)

T = TypeVar("T")


class EventWriter:
    """One idempotent producer per process; a background thread serves its delivery callbacks.

    Its local queue is bounded (`log.clients.PRODUCER_QUEUE_KB`) and a full queue blocks the caller until
    deliveries make room: nothing is dropped, so every acknowledged write is durable. `backpressure`
    counts those waits.
    """

    def __init__(self, bootstrap: str, experiment: str, codec: AvroCodec, producer_id: str,
                 **producer_overrides: Any) -> None:
        self.experiment = experiment
        self.codec = codec
        self.producer_id = producer_id
        self._producer = make_producer(bootstrap, producer_id, **producer_overrides)
        self.backpressure = Backpressure()
        #: Records `produce_raw` queued: the dead letters this process wrote (for metrics).
        self.raw_produced = 0
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll_loop, name=f"{producer_id}-poll", daemon=True)
        self._poller.start()

    def _poll_loop(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.05)

    def encode(self, new: NewEvent) -> bytes:
        """The bytes appended for `new` (see `encode_event`); raises for an event the log cannot take."""
        return encode_event(self.codec, new)

    def _encoded(self, events: Sequence[NewEvent]) -> list[EncodedEvent]:
        return [EncodedEvent(new, self.encode(new)) for new in events]

    def _produce(self, encoded: EncodedEvent, on_done: Callable[[KafkaError | None, Message | None], None]) -> None:
        new = encoded.new
        blocked_since: float | None = None
        while True:
            try:
                self._producer.produce(topic_name(self.experiment, new.topic), value=encoded.value,
                                       key=new.key.encode(), on_delivery=on_done)
                break
            except BufferError:  # local queue full: let deliveries drain, then retry
                blocked_since = blocked_since or time.perf_counter()
                self._producer.poll(0.05)
        if blocked_since is not None:
            self.backpressure.record(time.perf_counter() - blocked_since)

    def produce_raw(self, topic: str, value: bytes | None, key: bytes | None,
                    headers: dict[str, bytes]) -> None:
        """Fire-and-forget for the dead-letter path: bytes as they were, origin in headers."""
        self._producer.produce(topic, value=value, key=key, headers=list(headers.items()))
        self.raw_produced += 1

    def send(self, events: Sequence[EncodedEvent], on_delivery: Callable[[Delivered | AppendError], None]) -> None:
        """Fire-and-forget append for high-volume streams (spans): returns once the events are queued.

        librdkafka batches them (linger) instead of one round trip per event. `on_delivery` runs on the
        poll thread with where the event was logged once Kafka acknowledged it, or with the error
        once it gave up; the caller keeps its own account and waits for it (e.g. KafkaTracer.flush).
        Events come encoded (`encode`): the tracer writes its spans' bytes itself (`tracer.span_bytes`).
        """
        for encoded in events:
            self._produce(encoded, _reporter(encoded.new, on_delivery))

    def append(self, events: Sequence[EncodedEvent]) -> asyncio.Future[list[LoggedEvent]]:
        """Queue the events now, in order, and return a future of them with their offsets, resolved once
        every one is durable. Queueing happens in the call, not when the future is awaited, so appends
        made one after the other reach the log in that order even while earlier ones are unacknowledged.

        If librdkafka refuses an event at once, its error is raised here; the events queued before it may
        still land, and nobody waits for their acknowledgements."""
        loop = asyncio.get_running_loop()
        acks = _Acks(loop, len(events))
        for index, encoded in enumerate(events):
            try:
                self._produce(encoded, self._resolver(encoded, acks.deliver, index))
            except BaseException:
                abandon([acks.done])
                raise
        return acks.done

    def append_sync(self, events: Sequence[NewEvent], timeout: float = 30.0) -> list[LoggedEvent]:
        """Blocking form of `append`, for scripts and the CLI."""
        results: list[LoggedEvent | AppendError | None] = [None] * len(events)
        done = threading.Semaphore(0)

        def settle(index: int, result: LoggedEvent | AppendError) -> None:
            results[index] = result
            done.release()

        for index, encoded in enumerate(self._encoded(events)):
            self._produce(encoded, self._resolver(encoded, lambda i, r: settle(i, r), index))
        for _ in events:
            if not done.acquire(timeout=timeout):
                raise AppendError(f"no acknowledgement from Kafka within {timeout}s")
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [r for r in results if isinstance(r, LoggedEvent)]

    def _resolver(self, encoded: EncodedEvent, deliver: Callable[[Any, LoggedEvent | AppendError], None],
                  token: Any) -> Callable[[KafkaError | None, Message | None], None]:
        new, value = encoded.new, self.codec.portable(encoded.value)

        def on_delivery(err: KafkaError | None, msg: Message | None) -> None:
            if err is not None or msg is None:
                deliver(token, AppendError(f"append of {new.kind} for {new.key} failed: {err}"))
                return
            deliver(token, LoggedEvent(new.kind, new.key, new.record, msg.topic() or "",
                                       msg.partition() or 0, msg.offset() or 0, value=value))

        return on_delivery

    def flush(self, timeout: float = 30.0) -> None:
        self._producer.flush(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Flush what is pending (at most `timeout` seconds), then stop the poll thread and the client.

        What is still unsent after `timeout` is purged, so its waiters get an error now; a client left
        open would keep reconnecting to an unreachable broker, and logging it, for the life of the process.
        """
        if self._producer.flush(timeout):
            self._producer.purge()
            self._producer.flush(0)  # serve the purged messages' delivery reports
        self._closed.set()
        self._poller.join(timeout=5)
        self._producer.close()


class _Acks:
    """One append's acknowledgements, gathered on the delivery thread: the loop is woken once per append (when
    the last one comes, or at the first error), not once per event. A wake-up is a self-pipe write and a turn
    of the loop; an append carries a commit batch's events, about ten per rollout."""

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.done: asyncio.Future[list[LoggedEvent]] = loop.create_future()
        self._loop = loop
        self._logged: list[LoggedEvent | None] = [None] * count
        self._missing = count
        self._settled = False
        #: Deliveries come on the poll thread, and on the caller's while a full queue makes it poll.
        self._lock = threading.Lock()
        if not count:
            self.done.set_result([])

    def deliver(self, index: int, result: LoggedEvent | AppendError) -> None:
        with self._lock:
            if self._settled:
                return
            if isinstance(result, LoggedEvent):
                self._logged[index] = result
                self._missing -= 1
                if self._missing:
                    return
            self._settled = True
        outcome = result if isinstance(result, AppendError) else [e for e in self._logged if e is not None]
        self._loop.call_soon_threadsafe(_settle, self.done, outcome)


def _reporter(new: NewEvent, on_delivery: Callable[[Delivered | AppendError], None]
              ) -> Callable[[KafkaError | None, Message | None], None]:
    """The delivery callback of one sent event: no logged event built for it (a span's sender wants its offset)."""
    def report(err: KafkaError | None, msg: Message | None) -> None:
        if err is not None or msg is None:
            on_delivery(AppendError(f"append of {new.kind} for {new.key} failed: {err}"))
        else:
            on_delivery(Delivered(msg.partition() or 0, msg.offset() or 0))

    return report


def abandon(futures: Iterable[asyncio.Future[Any]]) -> None:
    """Nobody will await these: mark their errors retrieved when they come, so asyncio logs none of them."""
    for future in futures:
        future.add_done_callback(_retrieved)


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _settle(future: asyncio.Future[T], result: T | AppendError) -> None:
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)

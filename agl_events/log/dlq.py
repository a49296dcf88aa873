"""An experiment's dead letters read back, and re-driven to where they came from once their cause is fixed.

A dead letter (`log.dead_letters`) is a record copied byte for byte to `agl.<exp>.dlq`, its origin and the
error in headers. It is known by its origin (source topic/partition/offset), not by its DLQ offset: the same
record is dead-lettered once by every reader that meets it (the store, a rebuild, a processor: each stores its
position past the record with the batch), so a listing shows it once, with how many copies were written.

A replay appends the record, as it was, to its source topic (the live store's follower or ingester then reads it
like any other record), then appends a marker to the DLQ: no value, `agl.dlq.replay-of` naming the origin and
`agl.dlq.replayed-to` where the copy went. A listing folds markers in, and a replay skips what was replayed, so
each dead letter is re-driven once. A crash between the copy and its marker makes the next replay copy it
again; that applies nothing twice, since folding an event or ingesting a task key again changes nothing
(idempotent reducers, one rollout per task key).

Only records a reader could not read are worth replaying, and only once the current code reads them: a
replay first checks that (decodes the event, parses the task request) and leaves the rest in place with the
reason. An event the view ignored (it named a rollout or attempt never created) is replayed once what it
names exists: replayed too early, it is ignored, and dead-lettered, again. A rollout the samples worker's
adapter failed on is not a record problem: a replayed marker would be ignored as already handled, so it is
listed, never replayed (rebuild the samples with a fixed adapter).

The DLQ is read whole into memory: it holds what went wrong in the last month (its retention), not history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from confluent_kafka import Message

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.events.task_record import decode_task_request
from agl_events.events.task_request import InvalidTaskRequest
from agl_events.log.clients import make_consumer, make_producer
from agl_events.log.dead_letters import IGNORED_EVENT
from agl_events.log.offsets import read_to_end
from agl_events.log.records import RawRecord
from agl_events.topics import Topic, topic_name

SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET = "agl.source.topic", "agl.source.partition", "agl.source.offset"
ERROR_TYPE, ERROR_MESSAGE = "agl.error.type", "agl.error.message"
REPLAY_OF, REPLAYED_TO = "agl.dlq.replay-of", "agl.dlq.replayed-to"
#: Errors a replay can cure: reading a record (the codec's, the task-request parser's, an event kind with no
#: reducer), once the code reads it; an event the view ignored, once what it names exists.
REPLAYABLE_ERRORS = frozenset({"CodecError", "UnknownSchemaError", "CorruptRecordError", "InvalidTaskRequest",
                               "UnknownEventKind", IGNORED_EVENT})


@dataclass
class DeadLetter:
    """One dead-lettered record, by origin: its bytes, why, and what became of it."""

    origin: str  # "<topic>/<partition>/<offset>"
    topic: str
    partition: int
    offset: int
    error_type: str
    error: str
    key: bytes | None
    value: bytes
    #: The DLQ offset of its first copy, and when that copy was written (seconds since the epoch).
    dlq_offset: int
    time: float
    headers: dict[str, bytes] = field(default_factory=dict)
    copies: int = 1
    #: Where a replay copied it ("<topic>/<partition>/<offset>"), None if never replayed.
    replayed_to: str | None = None


def origin_of(topic: str, partition: int, offset: int) -> str:
    return f"{topic}/{partition}/{offset}"


def _text(headers: dict[str, bytes], name: str) -> str:
    return headers.get(name, b"").decode(errors="replace")


def fold(messages: Iterable[RawRecord]) -> list[DeadLetter]:
    """The dead letters in DLQ records (oldest first), copies merged by origin and replay markers applied."""
    found: dict[str, DeadLetter] = {}
    replays: dict[str, str] = {}
    for msg in messages:
        headers = msg.headers
        if REPLAY_OF in headers:
            replays[_text(headers, REPLAY_OF)] = _text(headers, REPLAYED_TO)
            continue
        topic = _text(headers, SOURCE_TOPIC)
        partition, offset = int(_text(headers, SOURCE_PARTITION) or -1), int(_text(headers, SOURCE_OFFSET) or -1)
        origin = origin_of(topic, partition, offset)
        if origin in found:
            found[origin].copies += 1
            continue
        found[origin] = DeadLetter(origin, topic, partition, offset, _text(headers, ERROR_TYPE),
                                   _text(headers, ERROR_MESSAGE), msg.key, msg.value or b"", msg.offset,
                                   msg.timestamp_ms / 1000, headers)
    for origin, target in replays.items():
        if origin in found:
            found[origin].replayed_to = target
    return sorted(found.values(), key=lambda d: d.dlq_offset)


def _dlq_messages(bootstrap: str, experiment: str) -> Iterator[RawRecord]:
    """Every record of the experiment's DLQ from its start to its end now."""
    consumer = make_consumer(bootstrap)
    try:
        yield from read_to_end(consumer, [topic_name(experiment, Topic.DLQ)])
    finally:
        consumer.close()


def dead_letters(bootstrap: str, experiment: str) -> list[DeadLetter]:
    """The experiment's dead letters now (see `fold`)."""
    return fold(_dlq_messages(bootstrap, experiment))


def unreplayable(letter: DeadLetter, codec: AvroCodec, experiment: str) -> str | None:
    """Why `letter` is not to be replayed now, or None when the current code reads it."""
    if letter.replayed_to is not None:
        return f"already replayed, to {letter.replayed_to}"
    if letter.error_type not in REPLAYABLE_ERRORS:
        return (f"not a record problem ({letter.error_type}: the samples worker's adapter failed on this "
                "rollout); a replay would change nothing: rebuild the samples with a fixed adapter")
    try:
        if letter.topic == topic_name(experiment, Topic.TASK_REQUESTS):
            decode_task_request(codec, letter.value)
        else:
            codec.decode(letter.value)
    except (CodecError, InvalidTaskRequest) as exc:
        return f"still unreadable: {exc}"
    return None


def replay(bootstrap: str, experiment: str, letters: Iterable[DeadLetter], timeout: float = 30.0
           ) -> dict[str, str]:
    """Copy each of `letters` back to its source topic, durably, then mark it replayed in the DLQ; returns
    origin -> where its copy went. The caller checks `unreplayable` first."""
    producer = make_producer(bootstrap, f"agl-dlq-replay-{experiment}")
    dlq, done = topic_name(experiment, Topic.DLQ), {}
    try:
        for letter in letters:
            delivered: list[Message] = []
            producer.produce(letter.topic, value=letter.value, key=letter.key,
                             headers=[(REPLAY_OF, letter.origin.encode())],
                             on_delivery=lambda err, msg, into=delivered: into.append(msg) if err is None else None)
            if producer.flush(timeout) or not delivered:
                raise RuntimeError(f"the broker did not take the copy of {letter.origin} within {timeout} s")
            copy = delivered[0]
            target = origin_of(copy.topic() or "", copy.partition() or 0, copy.offset() or 0)
            producer.produce(dlq, value=None, key=letter.origin.encode(),
                             headers=[(REPLAY_OF, letter.origin.encode()), (REPLAYED_TO, target.encode())])
            if producer.flush(timeout):
                raise RuntimeError(f"{letter.origin} was copied to {target}, but its replay marker was not "
                                   "acknowledged: a later replay copies it again (harmless)")
            letter.replayed_to = done[letter.origin] = target
    finally:
        producer.flush(timeout)
    return done

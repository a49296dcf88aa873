"""Encoding an event for the log, within the size the log takes: one check for both backends.

Both store backends encode every event here when it is decided (see `committer`), so an event too large
for Kafka is refused the same way in memory and on the broker, and refused alone: the commands batched
with it still commit. Checked here, before librdkafka sees it, the error can say what was too large.
"""

from __future__ import annotations

from agl_events.events.codec import AvroCodec
from agl_events.log.records import NewEvent
from agl_events.topics import MESSAGE_MAX_BYTES

#: The largest event (encoded value plus key) the store appends. Below the per-record limit of the broker
#: and the producer by room for record and batch framing and lz4's worst case (0.4% larger), so an event
#: that passes here is never refused later, when its callers would learn only that "the append failed".
EVENT_MAX_BYTES = MESSAGE_MAX_BYTES - 64 * 1024


class EventTooLargeError(ValueError):
    """An event would exceed EVENT_MAX_BYTES: the caller's input is too large (the server answers 413)."""


def encode_event(codec: AvroCodec, new: NewEvent) -> bytes:
    """The bytes the log stores for `new`; CodecError if it breaks its schema, EventTooLargeError if too big."""
    return checked(new.kind, new.key, codec.encode(new.kind, new.record))


def checked(kind: str, key: str, value: bytes) -> bytes:
    """`value`, the encoded `kind` event keyed `key`, if the log takes its size; else EventTooLargeError."""
    size = len(value) + len(key.encode())
    if size > EVENT_MAX_BYTES:
        raise EventTooLargeError(f"{kind} event for {key} is {size} bytes encoded; "
                                 f"the limit is {EVENT_MAX_BYTES} bytes")
    return value

"""The event contract: Avro schemas of every event kind, their typed classes (`events.typed`), and the codec that
turns events into bytes."""

from agl_events.events.codec import AvroCodec, CodecError, CorruptRecordError, UnknownSchemaError
from agl_events.events.schemas import EventSchemas, load_event_schemas

__all__ = [
    "AvroCodec",
    "CodecError",
    "CorruptRecordError",
    "EventSchemas",
    "UnknownSchemaError",
    "load_event_schemas",
]

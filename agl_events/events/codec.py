"""One codec for every event: fastavro schemaless encoding in a self-describing frame.

Without a Schema Registry each record is Avro single-object encoded (marker C3 01, the writer
schema's 8-byte CRC-64-AVRO fingerprint little endian, then the Avro body), so any reader holding
the schemas can decode it with no service running. With a registry URL the frame is Confluent's
wire format (magic 0, 4-byte big-endian schema id), which Confluent tooling understands.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from typing import Any, Protocol

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from agl_events.events.kinds import KINDS
from agl_events.events.leading import LeadingFields, plan_leading
from agl_events.events.schemas import EventSchema, EventSchemas, load_event_schemas

SINGLE_OBJECT_MARKER = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"


class CodecError(ValueError):
    """A record could not be encoded or decoded."""


class UnknownSchemaError(CodecError):
    """The record names a schema (fingerprint, registry id or event name) this process does not know."""


class CorruptRecordError(CodecError):
    """The bytes are not a valid frame, or the Avro body does not match its writer schema."""


@dataclass(frozen=True)
class Decoded:
    """An event read back: its kind (schema short name) and its record."""

    name: str
    record: dict[str, Any]


class SchemaRegistry(Protocol):
    """Where schemas get ids: Confluent Schema Registry (`log.registry`) or a stand-in. Schemas are Avro JSON."""

    def register_schema(self, subject_name: str, schema: str) -> int:
        """The id of `schema` under `subject_name`, registered now if it is new (the same id for the same schema)."""
        ...

    def get_schema(self, schema_id: int) -> str:
        """The schema registered as `schema_id`; raises when there is none."""
        ...


class AvroCodec:
    """Encode and decode events of the contract. Thread-safe after construction (caches only grow)."""

    def __init__(self, schemas: EventSchemas | None = None, registry: SchemaRegistry | None = None) -> None:
        self.schemas = schemas or load_event_schemas()
        self._registry = registry
        self._ids: dict[str, int] = {}
        self._by_id: dict[int, EventSchema] = {}
        self._plans: dict[tuple[bytes, frozenset[tuple[str, ...]]], LeadingFields | None] = {}

    def _schema(self, name: str) -> EventSchema:
        try:
            return self.schemas[name]
        except KeyError:
            raise UnknownSchemaError(f"no event schema named {name!r}") from None

    def encode(self, name: str, record: dict[str, Any]) -> bytes:
        """Frame and encode `record` as event kind `name`; a record that breaks the schema raises CodecError."""
        schema = self._schema(name)
        buf = io.BytesIO()
        buf.write(self._header(schema))
        try:
            schemaless_writer(buf, schema.parsed, record, strict_allow_default=True)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CodecError(f"record does not match schema {name}: {exc}") from exc
        return buf.getvalue()

    def header(self, name: str) -> bytes:
        """The frame `encode` puts before the Avro body of a `name` record, for a writer that encodes bodies itself
        (`tracer.span_bytes`); with a registry, the schema is registered on the first call."""
        return self._header(self._schema(name))

    def decode(self, data: bytes) -> Decoded:
        """Decode any framed event; raises UnknownSchemaError or CorruptRecordError, never anything else."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CorruptRecordError(f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
        writer, offset = self._writer_of(data)
        if writer.name not in KINDS:  # e.g. another application's schema id in a shared registry
            raise UnknownSchemaError(f"schema {writer.name!r} is not an event kind of agl-events")
        reader = self.schemas.by_name.get(writer.name, writer)
        try:
            body = io.BytesIO(data[offset:])
            record = schemaless_reader(
                body, writer.parsed, None if reader is writer else reader.parsed
            )
            if body.tell() != len(data) - offset:
                raise CorruptRecordError(
                    f"{len(data) - offset - body.tell()} trailing bytes after a {writer.name} record"
                )
        except CodecError:
            raise
        except Exception as exc:  # fastavro raises many types on garbage; callers need one
            raise CorruptRecordError(f"cannot decode {writer.name} record: {exc!r}") from exc
        return Decoded(writer.name, record)  # type: ignore[arg-type]

    def leading(self, data: bytes, name: str, wanted: frozenset[tuple[str, ...]]) -> dict[str, Any] | None:
        """The `wanted` fields of a `name` record (paths: `("span", "rollout_id")`), read from the front of its body
        without decoding the rest (`events.leading`); None when `data` is another kind or its writer schema does
        not put them first, so the caller decodes it in full. Only what is read is checked: the frame (an unknown
        schema raises UnknownSchemaError) and the leading fields (CorruptRecordError), not the rest of the body."""
        writer, offset = self._writer_of(data)
        if writer.name != name:
            return None
        key = (writer.fingerprint, wanted)
        if key not in self._plans:
            self._plans[key] = plan_leading(writer.schema, set(wanted))
        plan = self._plans[key]
        if plan is None:
            return None
        try:
            return plan.read(data, offset)
        except (ValueError, IndexError, struct.error) as exc:
            raise CorruptRecordError(f"cannot read the leading fields of a {name} record: {exc!r}") from exc

    def portable(self, data: bytes) -> bytes | None:
        """`data` in single-object framing, which any codec decodes with no registry running: `data` itself unless a
        registry framed it; None when its writer schema is one this codec knows only from the registry."""
        if data[:2] == SINGLE_OBJECT_MARKER:
            return data
        writer, offset = self._writer_of(data)
        if self.schemas.by_fingerprint.get(writer.fingerprint) is None:
            return None
        return SINGLE_OBJECT_MARKER + writer.fingerprint + data[offset:]

    def _header(self, schema: EventSchema) -> bytes:
        if self._registry is None:
            return SINGLE_OBJECT_MARKER + schema.fingerprint
        schema_id = self._ids.get(schema.name)
        if schema_id is None:
            schema_id = self._registry.register_schema(schema.full_name, json.dumps(schema.schema))
            self._ids[schema.name] = schema_id
            self._by_id[schema_id] = schema
        return CONFLUENT_MAGIC + struct.pack(">I", schema_id)

    def _writer_of(self, data: bytes) -> tuple[EventSchema, int]:
        """The writer schema named by the frame, and where the Avro body starts."""
        if data[:2] == SINGLE_OBJECT_MARKER and len(data) >= 10:
            writer = self.schemas.by_fingerprint.get(data[2:10])
            if writer is None:
                raise UnknownSchemaError(f"unknown schema fingerprint {data[2:10].hex()}")
            return writer, 10
        if self._registry is not None and data[:1] == CONFLUENT_MAGIC and len(data) >= 5:
            return self._schema_by_id(struct.unpack(">I", data[1:5])[0]), 5
        raise CorruptRecordError(
            f"not an agl-events record: starts with {data[:10].hex() or 'nothing'} "
            f"(expected single-object marker c301{' or Confluent magic 00' if self._registry else ''})"
        )

    def _schema_by_id(self, schema_id: int) -> EventSchema:
        cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        assert self._registry is not None
        try:
            registered = self._registry.get_schema(schema_id)
        except Exception as exc:
            raise UnknownSchemaError(f"schema id {schema_id} not found in the registry: {exc}") from exc
        schema_json = json.loads(registered)
        from agl_events.events.schemas import build_event_schema

        writer = build_event_schema(schema_json)
        parse_schema(writer.schema)  # validates before caching
        self._by_id[schema_id] = writer
        return writer

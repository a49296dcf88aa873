"""The codec: every event kind round-trips; bad bytes give typed errors; frames follow the Avro spec."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agl_events.events import (
    AvroCodec,
    CodecError,
    CorruptRecordError,
    UnknownSchemaError,
    load_event_schemas,
)
from agl_events.events.codec import CONFLUENT_MAGIC, SINGLE_OBJECT_MARKER
from agl_events.events.schemas import EventSchema
from tests.events.sample import sample

SCHEMAS = load_event_schemas()


def _crc64_avro(data: bytes) -> int:
    """CRC-64-AVRO written from the specification's reference code, independent of fastavro."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def test_the_contract_covers_every_event_kind_the_store_needs() -> None:
    names = {s.name for s in SCHEMAS}
    assert {"RolloutEnqueued", "RolloutStarted", "RolloutUpdated", "RolloutStatusChanged", "AttemptCreated",
            "AttemptStatusChanged", "AttemptHeartbeat", "SpanAdded", "ResourcesPublished", "ResourcesUpdated",
            "WorkerHeartbeat", "WorkerStatusChanged", "TaskDispatched"} <= names
    for schema in SCHEMAS:
        fields = [f["name"] for f in schema.schema["fields"]]
        assert fields[:3] == ["event_id", "time", "producer_id"], schema.name
        assert schema.full_name == f"agl.events.{schema.name}"


@pytest.mark.parametrize("schema", list(SCHEMAS), ids=lambda s: s.name)
@pytest.mark.parametrize("richest", [True, False], ids=["rich", "sparse"])
def test_every_schema_round_trips(schema: EventSchema, richest: bool) -> None:
    record = {f["name"]: sample(f["type"], richest=richest) for f in schema.schema["fields"]}
    record = json.loads(json.dumps(record, default=list))  # plain JSON types, as callers hold them
    codec = AvroCodec(SCHEMAS)
    decoded = codec.decode(codec.encode(schema.name, record))
    assert decoded.name == schema.name
    assert decoded.record == record


def test_single_object_frame_is_marker_then_little_endian_crc64_of_canonical_form() -> None:
    codec = AvroCodec(SCHEMAS)
    schema = SCHEMAS["AttemptHeartbeat"]
    data = codec.encode("AttemptHeartbeat", {"event_id": "e", "time": 1.0, "producer_id": "p",
                                             "rollout_id": "ro-1", "attempt_id": "at-1", "heartbeat_time": 2.0})
    assert data[:2] == SINGLE_OBJECT_MARKER
    assert int.from_bytes(data[2:10], "little") == _crc64_avro(schema.canonical.encode())


def test_span_attribute_types_survive_encoding() -> None:
    codec = AvroCodec(SCHEMAS)
    record = {f["name"]: sample(f["type"]) for f in SCHEMAS["SpanAdded"].schema["fields"]}
    values = {"flag": True, "count": 3, "ratio": 0.25, "text": "x", "ids": [1, 2], "tags": ["a", "b"]}
    record["span"]["attributes"] = {"values": values}
    out = codec.decode(codec.encode("SpanAdded", record)).record["span"]["attributes"]["values"]
    assert out == values
    assert type(out["flag"]) is bool and type(out["count"]) is int and type(out["ratio"]) is float


def _valid_bytes() -> bytes:
    record = {f["name"]: sample(f["type"]) for f in SCHEMAS["RolloutEnqueued"].schema["fields"]}
    return AvroCodec(SCHEMAS).encode("RolloutEnqueued", record)


@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        (lambda b: b[:-4], CorruptRecordError),                     # truncated body
        (lambda b: b + b"\x00\x01", CorruptRecordError),            # trailing garbage
        (lambda b: b"\x00" + b[1:], CorruptRecordError),            # wrong marker, no registry
        (lambda b: b"", CorruptRecordError),                         # empty
        (lambda b: b"{\"json\": true}", CorruptRecordError),         # not Avro at all
        (lambda b: b[:2] + b"\x01" * 8 + b[10:], UnknownSchemaError),  # unknown fingerprint
    ],
)
def test_corrupt_records_raise_typed_errors(mangle: Any, error: type[CodecError]) -> None:
    with pytest.raises(error):
        AvroCodec(SCHEMAS).decode(mangle(_valid_bytes()))


def test_encoding_a_record_that_breaks_its_schema_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="AttemptHeartbeat"):
        AvroCodec(SCHEMAS).encode("AttemptHeartbeat", {"event_id": "e", "time": "not a number"})
    with pytest.raises(UnknownSchemaError):
        AvroCodec(SCHEMAS).encode("NoSuchEvent", {})


class _InProcessRegistry:
    """Stands in for Confluent Schema Registry (not available on Maven Central or PyPI) in a unit test."""

    def __init__(self) -> None:
        self.schemas: dict[int, Any] = {}
        self.subjects: dict[str, int] = {}

    def register_schema(self, subject_name: str, schema: Any) -> int:
        if subject_name not in self.subjects:
            self.subjects[subject_name] = 100 + len(self.subjects)
            self.schemas[self.subjects[subject_name]] = schema
        return self.subjects[subject_name]

    def get_schema(self, schema_id: int) -> Any:
        return self.schemas[schema_id]


def test_with_a_registry_records_use_the_confluent_wire_format() -> None:
    registry = _InProcessRegistry()
    writer = AvroCodec(SCHEMAS, registry=registry)
    record = {f["name"]: sample(f["type"]) for f in SCHEMAS["WorkerHeartbeat"].schema["fields"]}
    data = writer.encode("WorkerHeartbeat", record)
    assert data[:1] == CONFLUENT_MAGIC and int.from_bytes(data[1:5], "big") == 100
    assert registry.subjects == {"agl.events.WorkerHeartbeat": 100}
    reader = AvroCodec(SCHEMAS, registry=registry)  # a fresh process: resolves id 100 via the registry
    assert reader.decode(data).record == record
    with pytest.raises(UnknownSchemaError):
        reader.decode(CONFLUENT_MAGIC + (999).to_bytes(4, "big") + data[5:])


def test_records_written_with_an_older_version_decode_into_the_current_shape() -> None:
    old = copy.deepcopy(SCHEMAS["WorkerHeartbeat"].schema)
    old["fields"] = [f for f in old["fields"] if f["name"] != "heartbeat_stats_json"]
    from agl_events.events.schemas import EventSchemas, build_event_schema

    old_schema = build_event_schema(old)
    old_codec = AvroCodec(EventSchemas({"WorkerHeartbeat": old_schema}, {old_schema.fingerprint: old_schema}))
    data = old_codec.encode("WorkerHeartbeat", {"event_id": "e", "time": 1.0, "producer_id": "p",
                                                "worker_id": "w", "stats_given": False})
    both = EventSchemas(SCHEMAS.by_name, {**SCHEMAS.by_fingerprint, old_schema.fingerprint: old_schema})
    decoded = AvroCodec(both).decode(data)
    assert decoded.record["heartbeat_stats_json"] is None and decoded.record["worker_id"] == "w"

"""A finished OpenTelemetry span straight to the bytes of its SpanAdded event: the tracer's hot path.

The record path (`tracer.convert.otel_span_record`, then fastavro) builds the span's nested dicts and has
fastavro walk them against the schema: 9-18 us and 21-33 us a span, a third of a runner's CPU per span in
`bench.runners`. Avro's binary encoding is the fields one after the other (strings, maps and arrays length-
prefixed, a union as its branch index before the value), so the body can be written from the span itself,
with what every span of an attempt repeats (its ids; the resource's attributes with the route stamped in)
encoded once per attempt. What it writes is byte for byte what fastavro writes for `otel_span_record`'s record
under the SpanAdded schema whose fingerprint is `SPAN_ADDED_FINGERPRINT` (tests/tracer/test_span_bytes.py
compares both on generated spans and fails when the schema changes without this module). A value outside
OpenTelemetry's attribute types (a subclass of int, a number past 64 bits) raises `NotCovered`, and the
caller encodes the record instead, which writes it, or refuses it, as before.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from agl_events.emitter.spans import seconds
from agl_events.events.jsontext import dumps
from agl_events.tracer.convert import ATTEMPT_ID, ROLLOUT_ID, SPAN_OWN_FIELDS, extra_fields

#: The CRC-64-AVRO fingerprint (hex) of the SpanAdded schema this module writes.
SPAN_ADDED_FINGERPRINT = "6062b6031d6f1b32"

_DOUBLE = struct.Struct("<d").pack
_SMALL = [bytes([n]) for n in range(128)]  # the varint of every zigzag value below 128
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_NULL, _SECOND = b"\x00", b"\x02"  # union branches 0 and 1 (zigzag varints)
_EMPTY = b"\x00"  # an empty map or array: a zero block count
_TRUE, _FALSE = b"\x01", b"\x00"
#: Branch index of each attribute value type in `Attributes.values`' union (string, boolean, long, double,
#: array); an array's items take the first four the same way.
_STRING, _BOOLEAN, _LONG, _DOUBLE_BRANCH, _ARRAY = b"\x00", b"\x02", b"\x04", b"\x06", b"\x08"


class NotCovered(ValueError):
    """A span this encoder does not write; its record is encoded the general way instead."""


def _long(n: int) -> bytes:
    """Avro's long: zigzag, then a little-endian base-128 varint."""
    if 0 <= n < 64:
        return _SMALL[n << 1]
    if n < _LONG_MIN or n > _LONG_MAX:
        raise NotCovered(f"{n} does not fit a long")
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return _SMALL[z]
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


#: The varint of every length below `_TABLED`: most attribute values are text of 64 bytes or more, past `_SMALL`, and
#: `_long`'s loop for them cost more than writing the text (with the string values written inline in `_attributes`,
#: a medium workload span's attributes 8.0-8.5 -> 4.6-5.3 us, its whole event 20.6-22.5 -> 17.4-17.9 us).
_TABLED = 4096
_LENGTHS = [_long(n) for n in range(_TABLED)]


def _string(out: list[bytes], text: str) -> None:
    data = text.encode()
    size = len(data)
    out.append(_LENGTHS[size] if size < _TABLED else _long(size))
    out.append(data)


def _scalar(out: list[bytes], value: Any) -> None:
    kind = type(value)
    if kind is str:
        out.append(_STRING)
        _string(out, value)
    elif kind is bool:
        out.append(_BOOLEAN)
        out.append(_TRUE if value else _FALSE)
    elif kind is int:
        out.append(_LONG)
        out.append(_long(value))
    elif kind is float:
        out.append(_DOUBLE_BRANCH)
        out.append(_DOUBLE(value))
    else:
        raise NotCovered(f"attribute value of type {kind.__name__}")


def _attributes(out: list[bytes], attributes: Mapping[str, Any] | None) -> None:
    """An `Attributes` record: its one field, the map of values (sequences as arrays)."""
    if not attributes:
        out.append(_EMPTY)
        return
    out.append(_long(len(attributes)))
    # A span's attributes are OpenTelemetry's `BoundedAttributes`, whose `items()` is the generic `ItemsView`'s
    # generator: its keys and a bound lookup cost half as much (1.5 against 2.9 µs for 25 keys).
    lookup = attributes.__getitem__
    for key in attributes:
        value = lookup(key)
        data = key.encode()
        size = len(data)
        kind = type(value)
        if kind is str:  # most values: written here, not through two calls each (`_string`, `_scalar`)
            text = value.encode()
            length = len(text)
            out += (_LENGTHS[size] if size < _TABLED else _long(size), data,
                    _STRING, _LENGTHS[length] if length < _TABLED else _long(length), text)
            continue
        out += (_LENGTHS[size] if size < _TABLED else _long(size), data)
        if kind is tuple or kind is list:
            out.append(_ARRAY)
            if value:
                out.append(_long(len(value)))
                for item in value:
                    _scalar(out, item)
            out.append(_EMPTY)
        else:
            _scalar(out, value)
    out.append(_EMPTY)


def _string_map(out: list[bytes], values: Iterable[tuple[str, str]], count: int) -> None:
    if count:
        out.append(_long(count))
        for key, value in values:
            _string(out, key)
            _string(out, value)
    out.append(_EMPTY)


def _ids(trace_id: int, span_id: int) -> tuple[bytes, bytes]:
    """A trace id and a span id, each as an Avro string. Ids in their range, i.e. all OpenTelemetry makes, have hex
    of 32 and 16 characters, whose length prefixes are the constant bytes "@" and " " (zigzag varints of 32 and
    16): each is one format and encode, no varint to compute."""
    trace = f"@{trace_id:032x}".encode() if 0 <= trace_id < _TRACE_IDS else _string_bytes(f"{trace_id:032x}")
    span = f" {span_id:016x}".encode() if 0 <= span_id < _SPAN_IDS else _string_bytes(f"{span_id:016x}")
    return trace, span


def _string_bytes(text: str) -> bytes:
    out: list[bytes] = []
    _string(out, text)
    return b"".join(out)


_TRACE_IDS, _SPAN_IDS = 1 << 128, 1 << 64
_NO_IDS = _ids(0, 0)


def _context(out: list[bytes], ctx: SpanContext, ids: tuple[bytes, bytes] | None = None) -> None:
    """A `SpanContext` record (`convert.context_record`); `ids` its `_ids` when the caller has them already."""
    out += ids or _ids(ctx.trace_id, ctx.span_id)
    out.append(_TRUE if ctx.is_remote else _FALSE)
    state = ctx.trace_state
    _string_map(out, state.items() if state else (), len(state) if state else 0)


def _time(out: list[bytes], nanos: int | None) -> None:
    """A `["null", "double"]` time: seconds, as `emitter.spans.seconds` makes them."""
    value = seconds(nanos)
    if value is None:
        out.append(_NULL)
    else:
        out.append(_SECOND)
        out.append(_DOUBLE(value))


def _optional_string(out: list[bytes], text: str | None) -> None:
    if text is None:
        out.append(_NULL)
    else:
        out.append(_SECOND)
        _string(out, text)


class AttemptSpans:
    """Writes the SpanAdded events of one attempt's spans, keeping the bytes its spans share: the codec's frame
    (`header`, `AvroCodec.header`), its ids, and the last resource's attributes with the attempt's route stamped in
    (as `otel_span_record(route=True)` does)."""

    def __init__(self, header: bytes, rollout_id: str, attempt_id: str, producer_id: str) -> None:
        self._header = header
        self._rollout_id, self._attempt_id = rollout_id, attempt_id
        ids: list[bytes] = []
        _string(ids, rollout_id)
        _string(ids, attempt_id)
        self._ids = b"".join(ids)
        producer: list[bytes] = []
        _string(producer, producer_id)
        self._producer = b"".join(producer)
        self._resource: tuple[Resource, bytes] | None = None

    def _resource_bytes(self, resource: Resource) -> bytes:
        """`resource_attributes` and `resource_schema_url`, written once per resource an attempt's spans name."""
        if self._resource is not None and self._resource[0] is resource:
            return self._resource[1]
        out: list[bytes] = []
        _attributes(out, {**resource.attributes, ROLLOUT_ID: self._rollout_id, ATTEMPT_ID: self._attempt_id})
        _string(out, resource.schema_url or "")
        written = b"".join(out)
        self._resource = (resource, written)
        return written

    def event(self, src: ReadableSpan, sequence_id: int, event_id: str, time: float) -> bytes:
        """The SpanAdded event of `src` as the log stores it (the frame, the event's header, its span record);
        NotCovered for a value this does not write (text that is not UTF-8 too: the record path refuses it with
        the codec's error)."""
        try:
            return self._event(src, sequence_id, event_id, time)
        except (UnicodeEncodeError, AttributeError, TypeError) as exc:
            raise NotCovered(str(exc)) from exc

    def _event(self, src: ReadableSpan, sequence_id: int, event_id: str, time: float) -> bytes:
        out: list[bytes] = [self._header]
        _string(out, event_id)
        out.append(_DOUBLE(time))
        out.append(self._producer)
        out.append(self._ids)
        out.append(_long(sequence_id))
        ctx = src.get_span_context()
        ids = _ids(ctx.trace_id, ctx.span_id) if ctx is not None else _NO_IDS
        out += ids
        parent = src.parent
        parent_ids = None if parent is None else _ids(parent.trace_id, parent.span_id)
        if parent_ids is None:
            out.append(_NULL)
        else:
            out += (_SECOND, parent_ids[1])  # the parent's span id, as the context record below has it
        _string(out, src.name)
        status = src.status
        _string(out, status.status_code.name)
        _optional_string(out, status.description)
        _attributes(out, src.attributes)
        events = src.events
        if events:
            out.append(_long(len(events)))
            for event in events:
                _string(out, event.name)
                _attributes(out, event.attributes)
                _time(out, event.timestamp)
        out.append(_EMPTY)
        links = src.links
        if links:
            out.append(_long(len(links)))
            for link in links:
                _context(out, link.context)
                if link.attributes:
                    out.append(_SECOND)
                    _attributes(out, link.attributes)
                else:
                    out.append(_NULL)
        out.append(_EMPTY)
        _time(out, src.start_time)
        _time(out, src.end_time)
        for context, context_ids in ((ctx, ids), (parent, parent_ids)):
            if context is None:
                out.append(_NULL)
            else:
                out.append(_SECOND)
                _context(out, context, context_ids)
        out.append(self._resource_bytes(src.resource))
        extra = extra_fields(src, SPAN_OWN_FIELDS)
        _optional_string(out, dumps(extra) if extra else None)
        return b"".join(out)

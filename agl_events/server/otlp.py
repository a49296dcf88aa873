"""OTLP/HTTP trace ingestion (`POST /v1/traces`), so OpenTelemetry exporters can write spans straight to a store.

Wire behaviour follows upstream (`agentlightning/utils/otlp.py`): binary protobuf only, optional gzip request
body, gzip response when accepted, 400 with a `google.rpc.Status` body for a bad content type or payload.
Spans name their rollout and attempt through the span or resource attributes `agentlightning.rollout_id` /
`agentlightning.attempt_id` (span wins); spans without both are skipped with a warning and reported as rejected
in `partial_success` (upstream drops them silently). Sequence ids come from `agentlightning.span_sequence_id`
or are allocated in one bulk call to the store.

Spans are built as `agl_events.types.Span` directly from protobuf: agentlightning is only a test dependency.
Attribute values the Span model cannot hold (nested maps, mixed-type arrays, nulls) are flattened to strings or
dropped instead of failing the whole batch, which upstream would do.
Store errors: ValueError/TypeError (e.g. an unknown rollout) -> 400; anything else -> 503, the status OTLP
exporters retry (they do not retry a 500).
"""

# No `from __future__ import annotations` here: FastAPI must evaluate the route signatures, which use
# dependency aliases local to the router factory.
import gzip
import json
import logging
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.routing import APIRoute
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus

from agl_events.server.errors import CLIENT_ERRORS
from agl_events.server.limits import MAX_BODY_BYTES
from agl_events.store.contract import LightningStore
from agl_events.types import Event, Link, OtelResource, Span, SpanContext, StatusCode, TraceStatus

PROTOBUF_CT = "application/x-protobuf"
ROLLOUT_ID_ATTR = "agentlightning.rollout_id"
ATTEMPT_ID_ATTR = "agentlightning.attempt_id"
SEQUENCE_ID_ATTR = "agentlightning.span_sequence_id"

_STATUS_CODES: dict[int, StatusCode] = {
    ProtoStatus.STATUS_CODE_UNSET: "UNSET",
    ProtoStatus.STATUS_CODE_OK: "OK",
    ProtoStatus.STATUS_CODE_ERROR: "ERROR",
}

logger = logging.getLogger("agl_events.server.otlp")

_BINARY = {"type": "string", "format": "binary"}
#: The route reads its body itself (protobuf, maybe gzipped), so the OpenAPI document is told what it takes.
_TRACES_BODY = {"requestBody": {
    "required": False,
    "description": "An OTLP `ExportTraceServiceRequest` in binary protobuf (`Content-Encoding: gzip` allowed); "
                   "empty is a valid, empty export",
    "content": {PROTOBUF_CT: {"schema": _BINARY}},
}}
_TRACES_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "An `ExportTraceServiceResponse` (protobuf); skipped spans in `partial_success`",
          "content": {PROTOBUF_CT: {"schema": _BINARY}}},
    400: {"description": "A `google.rpc.Status` (protobuf): bad content type or encoding, unparsable payload, "
                         "spans of an unknown rollout or attempt", "content": {PROTOBUF_CT: {"schema": _BINARY}}},
    503: {"description": "A `google.rpc.Status` (protobuf): the store cannot take spans now; retry",
          "content": {PROTOBUF_CT: {"schema": _BINARY}}},
}


_NOT_IMPLEMENTED: dict[int | str, dict[str, Any]] = {
    501: {"description": "A `google.rpc.Status` (protobuf): this server takes OTLP traces only",
          "content": {PROTOBUF_CT: {"schema": _BINARY}}},
}


class ProtobufResponse(Response):
    media_type = PROTOBUF_CT


# --- protobuf -> Python --------------------------------------------------------------------------------------
def _raw_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as plain Python (bytes as hex, maps as dicts), as upstream converts it."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_raw_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _raw_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def _attribute(value: Any) -> Any:
    """Fit a raw value into the flat OTel attribute types the Span model accepts (None = drop the key)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    items = [v for v in value if v is not None]
    kinds = {type(v) for v in items}
    if len(kinds) <= 1 and kinds <= {str, bool, int, float}:
        return items
    if kinds == {int, float}:
        return [float(v) for v in items]
    return [v if isinstance(v, str) else json.dumps(v, default=str) for v in items]


def _attributes(kvs: Sequence[KeyValue]) -> dict[str, Any]:
    converted = ((kv.key, _attribute(_raw_value(kv.value))) for kv in kvs)
    return {key: value for key, value in converted if value is not None}


def _seconds(nanos: int) -> float | None:
    """OTLP nanoseconds -> seconds; 0 means unset. Values that already look like seconds are kept (upstream)."""
    if not nanos:
        return None
    return nanos / 1_000_000_000 if nanos > 1e12 else float(nanos)


def _trace_hex(raw: bytes) -> str:
    return raw.hex().rjust(32, "0") if raw else "0" * 32


def _span_hex(raw: bytes) -> str:
    return raw.hex().rjust(16, "0") if raw else "0" * 16


def _context(trace_id: bytes, span_id: bytes) -> SpanContext:
    # OTLP carries trace_state as a W3C string and no is_remote flag; upstream sets {} and False.
    return SpanContext(trace_id=_trace_hex(trace_id), span_id=_span_hex(span_id), is_remote=False, trace_state={})


def _sequence_id(raw: Any) -> int | None:
    """A usable explicit sequence id, or None to allocate one (absent, not an integer, or negative)."""
    if raw is None:
        return None
    try:
        value = int(str(raw))
    except ValueError:
        logger.warning("Ignoring non-integer %s %r; allocating one", SEQUENCE_ID_ATTR, raw)
        return None
    if value < 0:
        logger.warning("Ignoring negative %s %r; allocating one", SEQUENCE_ID_ATTR, raw)
        return None
    return value


def _span(proto: ProtoSpan, rollout_id: str, attempt_id: str, sequence_id: int, resource: OtelResource,
          attributes: dict[str, Any]) -> Span:
    return Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        trace_id=_trace_hex(proto.trace_id),
        span_id=_span_hex(proto.span_id),
        parent_id=_span_hex(proto.parent_span_id) if proto.parent_span_id else None,
        name=proto.name,
        status=TraceStatus(status_code=_STATUS_CODES.get(proto.status.code, "UNSET"),
                           description=proto.status.message or None),
        attributes=attributes,
        events=[Event(name=e.name, attributes=_attributes(e.attributes), timestamp=_seconds(e.time_unix_nano))
                for e in proto.events],
        links=[Link(context=_context(link.trace_id, link.span_id), attributes=_attributes(link.attributes) or None)
               for link in proto.links],
        start_time=_seconds(proto.start_time_unix_nano),
        end_time=_seconds(proto.end_time_unix_nano),
        context=_context(proto.trace_id, proto.span_id),
        parent=None,  # OTLP has only the parent's span id, not its full context
        resource=resource,
    )


def spans_from_request(request: ExportTraceServiceRequest) -> tuple[list[Span], int]:
    """Convert an export request into Spans, and count the spans skipped for lack of rollout/attempt ids.

    Spans without an explicit sequence id get `sequence_id=-1`; `ingest` allocates real ones.
    """
    spans: list[Span] = []
    skipped = 0
    for resource_spans in request.resource_spans:
        resource_attrs = _attributes(resource_spans.resource.attributes)
        resource = OtelResource(attributes=resource_attrs, schema_url=resource_spans.schema_url or "")
        for scope_spans in resource_spans.scope_spans:
            for proto in scope_spans.spans:
                attrs = _attributes(proto.attributes)
                ids = [attrs.get(key, resource_attrs.get(key)) for key in (ROLLOUT_ID_ATTR, ATTEMPT_ID_ATTR)]
                if ids[0] is None or ids[1] is None:
                    logger.warning("Skipping OTLP span %r: it names no %s or no %s (rollout_id=%s, attempt_id=%s)",
                                   proto.name, ROLLOUT_ID_ATTR, ATTEMPT_ID_ATTR, ids[0], ids[1])
                    skipped += 1
                    continue
                sequence_id = _sequence_id(attrs.get(SEQUENCE_ID_ATTR, resource_attrs.get(SEQUENCE_ID_ATTR)))
                seq = -1 if sequence_id is None else sequence_id
                spans.append(_span(proto, str(ids[0]), str(ids[1]), seq, resource, attrs))
    return spans, skipped


async def ingest(store: LightningStore, request: ExportTraceServiceRequest) -> tuple[int, int]:
    """Store the request's spans; returns (spans stored, spans skipped for missing ids)."""
    spans, skipped = spans_from_request(request)
    pending = [span for span in spans if span.sequence_id < 0]
    if pending:
        issued = await store.get_many_span_sequence_ids([(s.rollout_id, s.attempt_id) for s in pending])
        for span, sequence_id in zip(pending, issued, strict=True):
            span.sequence_id = sequence_id
    stored = await store.add_many_spans(spans) if spans else []
    return len(stored), skipped


# --- HTTP ----------------------------------------------------------------------------------------------------
def _accepts_gzip(request: Request) -> bool:
    tokens = request.headers.get("Accept-Encoding", "").split(",")
    return "gzip" in {token.split(";")[0].strip().lower() for token in tokens}


def _protobuf_response(request: Request, payload: bytes, status_code: int) -> ProtobufResponse:
    headers: dict[str, str] = {}
    if _accepts_gzip(request):
        payload = gzip.compress(payload)
        headers["Content-Encoding"] = "gzip"
    return ProtobufResponse(content=payload, status_code=status_code, headers=headers)


def _status_response(request: Request, message: str, status_code: int = 400) -> Response:
    """An OTLP error: a google.rpc.Status in protobuf (the request's encoding)."""
    return _protobuf_response(request, Status(code=0, message=message).SerializeToString(), status_code)


async def _read_body(request: Request) -> bytes:
    """The request body, gunzipped if needed; raises ValueError on anything unreadable."""
    raw = await request.body()
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise ValueError(f"Unsupported Content-Encoding '{encoding}', expected 'gzip' or none")
    try:
        return _gunzip(raw, MAX_BODY_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"Unable to decompress gzip body: {exc}") from exc


def _gunzip(raw: bytes, limit: int) -> bytes:
    """`gzip.decompress`, stopping past `limit` bytes: a small body must not inflate into gigabytes."""
    out = bytearray()
    while raw:  # one gzip member after another, as gzip.decompress reads them
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        out += inflater.decompress(raw, limit + 1 - len(out))
        if len(out) > limit:
            raise ValueError(f"the gzip body inflates past the limit of {limit} bytes")
        if not inflater.eof:
            raise EOFError("compressed data ended before the end-of-stream marker")
        raw = inflater.unused_data
    return bytes(out)


class _OtlpRoute(APIRoute):
    """Answers failures with an OTLP Status body, including failures to open the experiment's store.

    Wrapping the whole route handler (dependencies included) matters: the store is resolved by a dependency,
    and a store that cannot be opened (Kafka down) must give a retryable 503, not a generic 500.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except HTTPException:
                raise
            except CLIENT_ERRORS as exc:
                logger.info("OTLP request rejected: %s: %s", type(exc).__name__, exc)
                return _status_response(request, f"{type(exc).__name__}: {exc}")
            except Exception:
                logger.exception("OTLP request failed on the server side")
                return _status_response(request, "store unavailable; retry later", status_code=503)

        return guarded


def _not_implemented(signal: str) -> Callable[[Request], Awaitable[Response]]:
    """The route of an OTLP signal we do not take: 501 as upstream, with a Status saying so (upstream sends
    an empty body, which leaves an exporter's log without a reason)."""

    async def not_implemented(request: Request) -> Response:
        return _status_response(request, f"OTLP {signal} are not accepted: this server takes traces only", 501)

    return not_implemented


def create_otlp_router(get_store: Callable[..., Awaitable[LightningStore]]) -> APIRouter:
    """`POST /v1/traces`, plus the other OTLP signals answered 501 (not implemented), as upstream."""
    router = APIRouter(prefix="/v1", route_class=_OtlpRoute)

    @router.post("/traces", response_class=ProtobufResponse, responses=_TRACES_RESPONSES, openapi_extra=_TRACES_BODY)
    async def otlp_traces(request: Request, store: Annotated[LightningStore, Depends(get_store)]) -> Response:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if content_type != PROTOBUF_CT:
            return _status_response(request, f"Unsupported Content-Type '{content_type}', expected '{PROTOBUF_CT}'")
        export = ExportTraceServiceRequest()
        try:
            body = await _read_body(request)
            if body:  # an empty request is valid and succeeds
                export.ParseFromString(body)
        except Exception as exc:
            return _status_response(request, f"Unable to parse OTLP traces payload: {exc}")
        stored, skipped = await ingest(store, export)  # store errors: see _OtlpRoute
        logger.debug("OTLP traces: %d spans stored, %d skipped", stored, skipped)
        response = ExportTraceServiceResponse()
        if skipped:
            response.partial_success.rejected_spans = skipped
            response.partial_success.error_message = (
                f"{skipped} span(s) without {ROLLOUT_ID_ATTR} and {ATTEMPT_ID_ATTR} attributes were dropped"
            )
        return _protobuf_response(request, response.SerializeToString(), 200)

    for signal in ("metrics", "logs", "development/profiles"):
        router.add_api_route(f"/{signal}", _not_implemented(signal), methods=["POST"], name=f"otlp_{signal}",
                             status_code=501, response_class=ProtobufResponse, responses=_NOT_IMPLEMENTED)

    return router


__all__ = ["create_otlp_router", "ingest", "spans_from_request"]

"""OTLP/HTTP ingestion at `/v1/traces`: the OpenTelemetry SDK exporter, hand-built protobuf, and bad requests.

Spans are read back through the REST API only, so these tests hold for any store backend.
"""

from __future__ import annotations

import gzip
from typing import Any

import httpx
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

AGL = "/v1/agl"
PROTOBUF = {"Content-Type": "application/x-protobuf"}
NS = 1_000_000_000


def _start(http: httpx.Client, prefix: str = "") -> tuple[str, str]:
    body = http.post(f"{prefix}{AGL}/rollouts", json={"input": "x"}).json()
    return body["rollout_id"], body["attempt"]["attempt_id"]


def _spans(http: httpx.Client, rollout_id: str, prefix: str = "") -> list[dict[str, Any]]:
    return http.post(f"{prefix}{AGL}/spans/search", json={"rollout_id": rollout_id}).json()["items"]


def _value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[_value(v) for v in value]))
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=_kvs(value)))
    if value is None:
        return AnyValue()
    return AnyValue(string_value=value)


def _kvs(attrs: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_value(v)) for k, v in attrs.items()]


def _proto_span(name: str, span_id: int, attrs: dict[str, Any] | None = None, **fields: Any) -> ProtoSpan:
    return ProtoSpan(trace_id=(7).to_bytes(16, "big"), span_id=span_id.to_bytes(8, "big"), name=name,
                     start_time_unix_nano=1_700_000_000 * NS, end_time_unix_nano=1_700_000_001 * NS,
                     attributes=_kvs(attrs or {}), **fields)


def _request(resource_attrs: dict[str, Any], *spans: ProtoSpan) -> ResourceSpans:
    return ResourceSpans(resource=Resource(attributes=_kvs(resource_attrs)), scope_spans=[ScopeSpans(spans=spans)],
                         schema_url="https://opentelemetry.io/schemas/1.21.0")


def _ids(rollout_id: str, attempt_id: str) -> dict[str, str]:
    return {"agentlightning.rollout_id": rollout_id, "agentlightning.attempt_id": attempt_id}


@pytest.mark.parametrize("prefix", ["", "/experiments/exp1"])
def test_sdk_exporter_with_gzip(http: httpx.Client, base_url: str, prefix: str) -> None:
    otlp_http = pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource as SdkResource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import Status as SdkStatus
    from opentelemetry.trace import StatusCode

    rollout_id, attempt_id = _start(http, prefix)
    provider = TracerProvider(resource=SdkResource.create({"service.name": "agent", **_ids(rollout_id, attempt_id)}))
    exporter = OTLPSpanExporter(
        endpoint=f"{base_url}{prefix}/v1/traces", compression=otlp_http.Compression.Gzip, timeout=5
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    with (
        tracer.start_as_current_span("agent.run", attributes={"task": "t1"}) as parent,
        tracer.start_as_current_span("llm.call", attributes={"tokens": [1, 2, 3]}) as child,
    ):
        child.add_event("chunk", {"i": 1})
        child.set_status(SdkStatus(StatusCode.ERROR, "boom"))
    provider.shutdown()

    spans = sorted(_spans(http, rollout_id, prefix), key=lambda s: s["sequence_id"])
    assert [s["name"] for s in spans] == ["llm.call", "agent.run"]  # exported as each span ends
    assert [s["sequence_id"] for s in spans] == [1, 2]
    child_span, parent_span = spans
    assert child_span["parent_id"] == format(parent.get_span_context().span_id, "016x")
    assert parent_span["parent_id"] is None and child_span["trace_id"] == parent_span["trace_id"]
    assert child_span["span_id"] == format(child.get_span_context().span_id, "016x")
    assert child_span["status"] == {"status_code": "ERROR", "description": "boom"}
    assert child_span["attributes"] == {"tokens": [1, 2, 3]}
    assert child_span["events"][0]["name"] == "chunk" and child_span["events"][0]["attributes"] == {"i": 1}
    assert 1e9 < child_span["start_time"] <= child_span["end_time"] < 1e11  # seconds
    assert child_span["context"]["is_remote"] is False and child_span["parent"] is None
    assert child_span["resource"]["attributes"]["service.name"] == "agent"
    assert child_span["resource"]["attributes"]["agentlightning.rollout_id"] == rollout_id
    if prefix:  # the default experiment never heard of this rollout
        assert _spans(http, rollout_id) == []


def test_hand_built_request_ids_sequence_ids_and_attributes(http: httpx.Client) -> None:
    rollout_a, attempt_a = _start(http)
    rollout_b, attempt_b = _start(http)
    request = ExportTraceServiceRequest(resource_spans=[
        _request(_ids(rollout_a, attempt_a),
                 _proto_span("from-resource", 1, {"nested": {"k": [1, 2]}, "mixed": [1, "a"], "nums": [1, 2.5],
                                                  "raw": b"\x01\xff", "gone": None}),
                 _proto_span("span-level", 2, {**_ids(rollout_b, attempt_b),
                                               "agentlightning.span_sequence_id": "100"}),
                 _proto_span("negative-seq", 3, {"agentlightning.span_sequence_id": -5},
                             parent_span_id=(1).to_bytes(8, "big"),
                             links=[ProtoSpan.Link(trace_id=(9).to_bytes(16, "big"), span_id=(4).to_bytes(8, "big"),
                                                   attributes=_kvs({"why": "retry"}))])),
        _request({"service.name": "stray"}, _proto_span("no-ids", 4)),
    ])
    response = http.post("/v1/traces", content=gzip.compress(request.SerializeToString()),
                         headers={**PROTOBUF, "Content-Encoding": "gzip", "Accept-Encoding": "gzip"})
    assert response.status_code == 200 and response.headers["content-type"] == "application/x-protobuf"
    assert response.headers["content-encoding"] == "gzip"  # httpx has already gunzipped .content
    reply = ExportTraceServiceResponse.FromString(response.content)
    assert reply.partial_success.rejected_spans == 1 and "no-ids" not in reply.partial_success.error_message

    in_a = {s["name"]: s for s in _spans(http, rollout_a)}
    assert set(in_a) == {"from-resource", "negative-seq"}
    assert (in_a["from-resource"]["sequence_id"], in_a["negative-seq"]["sequence_id"]) == (1, 2)
    attrs = in_a["from-resource"]["attributes"]
    assert attrs == {"nested": '{"k": [1, 2]}', "mixed": ["1", "a"], "nums": [1.0, 2.5], "raw": "01ff"}
    linked = in_a["negative-seq"]
    assert linked["parent_id"] == "0000000000000001" and linked["trace_id"] == "0" * 31 + "7"
    assert linked["links"] == [{"context": {"trace_id": "0" * 31 + "9", "span_id": "0" * 15 + "4",
                                            "is_remote": False, "trace_state": {}},
                                "attributes": {"why": "retry"}}]
    assert linked["start_time"] == 1_700_000_000 and linked["end_time"] == 1_700_000_001
    assert linked["resource"]["schema_url"] == "https://opentelemetry.io/schemas/1.21.0"

    in_b = _spans(http, rollout_b)
    assert [(s["name"], s["sequence_id"]) for s in in_b] == [("span-level", 100)]
    assert in_b[0]["attempt_id"] == attempt_b
    # The explicit id bumped rollout B's counter; rollout A's counter is separate.
    assert http.post(f"{AGL}/spans/next", json={"rollout_id": rollout_b, "attempt_id": attempt_b}).json() == {
        "sequence_id": 101}
    assert http.post(f"{AGL}/spans/next", json={"rollout_id": rollout_a, "attempt_id": attempt_a}).json() == {
        "sequence_id": 3}


def test_resending_a_span_is_not_stored_twice(http: httpx.Client) -> None:
    rollout_id, attempt_id = _start(http)
    body = ExportTraceServiceRequest(resource_spans=[_request(_ids(rollout_id, attempt_id), _proto_span("s", 1))])
    for _ in range(2):
        assert http.post("/v1/traces", content=body.SerializeToString(), headers=PROTOBUF).status_code == 200
    assert len(_spans(http, rollout_id)) == 1


def test_empty_request_succeeds(http: httpx.Client) -> None:
    # httpx asks for gzip by default; without it the reply must not be compressed.
    response = http.post("/v1/traces", content=b"", headers={**PROTOBUF, "Accept-Encoding": "identity"})
    assert response.status_code == 200 and ExportTraceServiceResponse.FromString(response.content).ByteSize() == 0
    assert "content-encoding" not in response.headers


def _status(response: httpx.Response) -> str:
    assert response.headers["content-type"] == "application/x-protobuf"
    return Status.FromString(response.content).message


@pytest.mark.parametrize(("content", "headers", "message"), [
    (b"{}", {"Content-Type": "application/json"}, "Unsupported Content-Type 'application/json'"),
    (b"", {}, "Unsupported Content-Type ''"),
    (b"\xff\xff\xff", PROTOBUF, "Unable to parse OTLP traces payload"),
    (b"not gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, "Unable to decompress"),
    (b"\x00", {**PROTOBUF, "Content-Encoding": "br"}, "Unsupported Content-Encoding 'br'"),
])
def test_bad_requests_are_400_with_a_status_body(http: httpx.Client, content: bytes, headers: dict[str, str],
                                                 message: str) -> None:
    response = http.post("/v1/traces", content=content, headers=headers)
    assert response.status_code == 400 and message in _status(response)


def test_spans_of_an_unknown_rollout_are_400(http: httpx.Client) -> None:
    body = ExportTraceServiceRequest(resource_spans=[_request(_ids("ro-missing", "at-missing"), _proto_span("s", 1))])
    response = http.post("/v1/traces", content=body.SerializeToString(), headers=PROTOBUF)
    assert response.status_code == 400 and "Rollout ro-missing not found" in _status(response)


def test_invalid_experiment_is_404(http: httpx.Client) -> None:
    assert http.post("/experiments/no.dots/v1/traces", content=b"", headers=PROTOBUF).status_code == 404


def test_store_that_cannot_open_is_a_retryable_503(start_server: Any) -> None:
    async def unavailable(experiment: str) -> Any:
        raise ConnectionError("broker unreachable")

    url = start_server(unavailable).url
    response = httpx.post(f"{url}/v1/traces", content=b"", headers=PROTOBUF)
    assert response.status_code == 503 and "retry" in _status(response)

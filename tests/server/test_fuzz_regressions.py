"""What fuzzing the API (test_fuzz.py) found, each case as it failed, pinned as a plain test on both backends.

Also the OpenAPI document those fuzz runs are generated from: every route is in it, with its inputs.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from google.rpc.status_pb2 import Status

from agl_events.server.experiments import EXPERIMENT_PREFIX
from agl_events.server.otlp import create_otlp_router
from agl_events.server.routes import create_agl_router, fixed_store
from agl_events.server.ui import create_ui_router
from agl_events.types import AVRO_INT_MAX, AVRO_LONG_MAX

AGL = "/v1/agl"


def _span(rollout_id: str, attempt_id: str, sequence_id: int) -> dict[str, Any]:
    return {"rollout_id": rollout_id, "attempt_id": attempt_id, "sequence_id": sequence_id, "trace_id": "a" * 32,
            "span_id": "b" * 16, "parent_id": None, "name": "s", "status": {"status_code": "UNSET"},
            "attributes": {}, "events": [], "links": [], "start_time": None, "end_time": None, "context": None,
            "parent": None, "resource": {"attributes": {}, "schema_url": ""}}


@pytest.mark.parametrize("path", ["/queues/rollouts/enqueue", "/rollouts"])
def test_a_max_attempts_beyond_an_avro_int_is_a_422_naming_the_field(http: httpx.Client, path: str) -> None:
    """Was a 500: fastavro's OverflowError appending the rollout (and the client retried it three times)."""
    def body(max_attempts: int) -> dict[str, Any]:
        rollout = {"input": 1, "config": {"max_attempts": max_attempts}}
        return {"rollouts": [rollout]} if path.startswith("/queues") else rollout

    response = http.post(f"{AGL}{path}", json=body(2**64))
    assert response.status_code == 422 and "max_attempts" in str(response.json()["detail"])
    largest = http.post(f"{AGL}{path}", json=body(AVRO_INT_MAX))
    assert largest.status_code == 201, largest.text
    created = largest.json()[0] if isinstance(largest.json(), list) else largest.json()
    read = http.get(f"{AGL}/rollouts/{created['rollout_id']}").json()
    assert read["config"]["max_attempts"] == AVRO_INT_MAX


def test_a_span_sequence_id_beyond_an_avro_long_is_a_422_naming_the_field(http: httpx.Client) -> None:
    """Was a 500 on the Kafka store: the span's `long` sequence id overflowed the Avro writer."""
    started = http.post(f"{AGL}/rollouts", json={"input": 1}).json()
    rid, aid = started["rollout_id"], started["attempt"]["attempt_id"]
    response = http.post(f"{AGL}/spans", json=_span(rid, aid, AVRO_LONG_MAX + 1))
    assert response.status_code == 422 and "sequence_id" in str(response.json()["detail"])
    assert http.post(f"{AGL}/spans", json=_span(rid, aid, AVRO_LONG_MAX)).status_code == 201


@pytest.mark.parametrize("signal", ["metrics", "logs", "development/profiles"])
def test_an_otlp_signal_not_taken_is_a_501_that_says_so(http: httpx.Client, signal: str) -> None:
    """Was a 501 with no body and no content type: an exporter logged no reason."""
    response = http.post(f"/v1/{signal}", content=b"", headers={"Content-Type": "application/x-protobuf"})
    assert response.status_code == 501 and response.headers["content-type"] == "application/x-protobuf"
    assert "takes traces only" in Status.FromString(response.content).message


def test_the_openapi_document_describes_every_route(http: httpx.Client) -> None:
    """Every store, OTLP and /ui route, at the root and under an experiment, plus /health and /metrics, is an
    operation; the experiment is a declared path parameter; the OTLP body (read raw by the route) is declared
    as protobuf; list routes declare their page."""
    document = http.get("/openapi.json").json()
    documented = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    routes = [*create_agl_router(fixed_store(None)).routes, *create_otlp_router(fixed_store(None)).routes,
              *create_ui_router(None, None).routes]  # type: ignore[arg-type]
    served = {(method, prefix + re.sub(r":\w+}", "}", route.path)) for route in routes for method in route.methods  # type: ignore[attr-defined]
              for prefix in ("", EXPERIMENT_PREFIX)}
    assert documented == served | {("GET", "/health"), ("GET", "/metrics")}

    rollouts = document["paths"]["/experiments/{experiment}/v1/agl/rollouts/{rollout_id}"]["get"]
    assert {p["name"]: p["in"] for p in rollouts["parameters"]} == {"rollout_id": "path", "experiment": "path"}
    traces = document["paths"]["/v1/traces"]["post"]
    assert list(traces["requestBody"]["content"]) == ["application/x-protobuf"]
    page = document["paths"]["/v1/agl/rollouts"]["get"]["responses"]["200"]["content"]["application/json"]
    assert page["schema"]["$ref"].startswith("#/components/schemas/PaginatedResult")


def test_a_span_attribute_beyond_64_bits_is_stored_as_the_float_the_log_keeps(http: httpx.Client) -> None:
    """Was a request that never answered, and every write after it hung too (Kafka store): the span was
    logged, then the view's JSON refused the integer and the committer waited on it forever."""
    started = http.post(f"{AGL}/rollouts", json={"input": 1}).json()
    rid, aid = started["rollout_id"], started["attempt"]["attempt_id"]
    span = {**_span(rid, aid, 1), "attributes": {"big": 2**70, "list": [1, 2**70], "small": 3}}
    response = http.post(f"{AGL}/spans", json=span, timeout=10)
    assert response.status_code == 201, response.text
    assert response.json()["attributes"] == {"big": float(2**70), "list": [1.0, float(2**70)], "small": 3}
    stored = http.get(f"{AGL}/spans", params={"rollout_id": rid}).json()["items"]
    assert stored[0]["attributes"] == response.json()["attributes"]
    assert http.post(f"{AGL}/rollouts", json={"input": 2}, timeout=10).status_code == 201  # writes go on


@pytest.mark.parametrize("spans_through", [{"0": 10**12}, {str(2**70): 1}])  # a negative one: a 422
def test_finishing_an_attempt_through_offsets_the_span_topic_lacks_is_a_400(
        http: httpx.Client, spans_through: dict[str, int]) -> None:
    """Was a request that never answered: the store waited for its view to fold offsets that cannot come."""
    started = http.post(f"{AGL}/rollouts", json={"input": 1}).json()
    path = f"{AGL}/rollouts/{started['rollout_id']}/attempts/{started['attempt']['attempt_id']}/finish"
    response = http.post(path, json={"status": "succeeded", "spans_through": spans_through}, timeout=15)
    assert response.status_code == 400 and "past the end of" in response.json()["detail"]
    assert http.get(f"{AGL}/rollouts/{started['rollout_id']}").json()["status"] == "preparing"  # not finished

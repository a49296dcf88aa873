"""Raw HTTP checks of the `/v1/agl` API: status codes, validation, null bodies, errors, experiments, metrics.

These pin what upstream's client cannot show (it hides status codes and swallows some errors), with the
error policy of this project: bad input -> 4xx with a message, 5xx only for server faults.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

AGL = "/v1/agl"


def _start(http: httpx.Client, prefix: str = "", **body: Any) -> dict[str, Any]:
    response = http.post(f"{prefix}{AGL}/rollouts", json={"input": "x", **body})
    assert response.status_code == 201, response.text
    return response.json()


def test_health(http: httpx.Client) -> None:
    assert http.get(f"{AGL}/health").json() == {"status": "ok"}
    assert http.get("/health").json() == {"status": "ok"}
    assert http.get(f"/experiments/exp1{AGL}/health").json() == {"status": "ok"}


def test_create_routes_answer_201_with_upstream_shapes(http: httpx.Client) -> None:
    enqueued = http.post(f"{AGL}/queues/rollouts/enqueue", json={"rollouts": [{"input": 1}, {"input": 2}]})
    assert enqueued.status_code == 201 and [r["status"] for r in enqueued.json()] == ["queuing", "queuing"]
    assert "attempt" not in enqueued.json()[0]
    assert http.post(f"{AGL}/queues/rollouts/enqueue", json={"rollouts": []}).json() == []

    started = _start(http, mode="train")
    assert started["attempt"]["sequence_id"] == 1 and started["config"]["max_attempts"] == 1
    attempt = http.post(f"{AGL}/rollouts/{started['rollout_id']}/attempts")
    assert attempt.status_code == 201 and attempt.json()["attempt"]["sequence_id"] == 2

    resources = http.post(f"{AGL}/resources", json={"p": {"resource_type": "prompt_template", "template": "{x}",
                                                          "engine": "f-string"}})
    assert resources.status_code == 201 and resources.json()["version"] == 1

    span = {
        "rollout_id": started["rollout_id"], "attempt_id": started["attempt"]["attempt_id"], "sequence_id": 1,
        "trace_id": "0" * 31 + "1", "span_id": "0" * 15 + "1", "parent_id": None, "name": "s",
        "status": {"status_code": "OK"}, "attributes": {}, "events": [], "links": [], "start_time": 1.0,
        "end_time": 2.0, "context": None, "parent": None, "resource": {"attributes": {}, "schema_url": ""},
        "custom_field": {"kept": True},
    }
    added = http.post(f"{AGL}/spans", json=span)
    assert added.status_code == 201 and added.json()["custom_field"] == {"kept": True}
    duplicate = http.post(f"{AGL}/spans", json=span)
    assert duplicate.status_code == 201 and duplicate.json() is None


def test_an_oversized_span_is_a_413_that_says_its_size_and_the_limit(http: httpx.Client) -> None:
    started = _start(http)
    span = {
        "rollout_id": started["rollout_id"], "attempt_id": started["attempt"]["attempt_id"], "sequence_id": 1,
        "trace_id": "0" * 31 + "1", "span_id": "0" * 15 + "1", "parent_id": None, "name": "s",
        "status": {"status_code": "OK"}, "attributes": {"blob": "x" * (9 * 1024 * 1024)}, "events": [],
        "links": [], "start_time": 1.0, "end_time": 2.0, "context": None, "parent": None,
        "resource": {"attributes": {}, "schema_url": ""},
    }
    response = http.post(f"{AGL}/spans", json=span, timeout=60)
    assert response.status_code == 413, response.text[:500]
    assert re.search(r"is \d+ bytes encoded; the limit is \d+ bytes", response.json()["detail"])
    assert http.post(f"{AGL}/spans", json={**span, "attributes": {}}).status_code == 201


def test_worker_routes_answer_as_upstream(http: httpx.Client) -> None:
    bare = http.post(f"{AGL}/workers/zed")  # no body at all: a heartbeat without stats
    assert bare.status_code == 200 and bare.json()["heartbeat_stats"] is None and bare.json()["status"] == "unknown"
    assert http.post(f"{AGL}/workers/amy", json={"heartbeat_stats": {"gpu": 1}}).json()["heartbeat_stats"] == {"gpu": 1}
    assert http.post(f"{AGL}/workers/amy", json={}).json()["heartbeat_stats"] == {"gpu": 1}  # {}: stats kept
    http.post(f"{AGL}/queues/rollouts/dequeue", json={"worker_id": "bob"})  # bob: idle
    assert http.get(f"{AGL}/workers/amy").json()["worker_id"] == "amy"
    listed = http.get(f"{AGL}/workers").json()
    assert [w["worker_id"] for w in listed["items"]] == ["zed", "amy", "bob"]  # first seen, as upstream
    assert (listed["limit"], listed["offset"], listed["total"]) == (-1, 0, 3)
    some = http.get(f"{AGL}/workers", params=[("status_in", "idle"), ("status_in", "busy")]).json()
    assert [w["worker_id"] for w in some["items"]] == ["bob"]
    found = http.post(f"{AGL}/workers/search", json={"worker_id_contains": "m", "limit": 5}).json()
    assert [w["worker_id"] for w in found["items"]] == ["amy"] and (found["limit"], found["total"]) == (5, 1)
    either = http.post(f"{AGL}/workers/search", json={"status_in": ["idle"], "worker_id_contains": "z",
                                                       "filter_logic": "or"}).json()
    assert [w["worker_id"] for w in either["items"]] == ["zed", "bob"]
    assert http.post(f"{AGL}/workers/search", json={"status_in": None}).json()["total"] == 3  # null: no filter


def test_dequeue_and_update_rollout_shapes(http: httpx.Client) -> None:
    assert http.post(f"{AGL}/queues/rollouts/dequeue").json() == []  # no body at all
    http.post(f"{AGL}/queues/rollouts/enqueue", json={"rollouts": [{"input": i} for i in range(3)]})
    assert http.post(f"{AGL}/queues/rollouts/dequeue", json={"limit": 0}).json() == []
    claimed = http.post(f"{AGL}/queues/rollouts/dequeue", json={"limit": 2, "worker_id": "w"}).json()
    assert len(claimed) == 2 and all(r["attempt"]["worker_id"] == "w" for r in claimed)

    # The update route answers a plain Rollout, even for a rollout that has attempts.
    updated = http.post(f"{AGL}/rollouts/{claimed[0]['rollout_id']}", json={"metadata": {"x": 1}})
    assert updated.status_code == 200 and "attempt" not in updated.json()
    assert updated.json()["status"] == "preparing" and updated.json()["metadata"] == {"x": 1}
    page = http.get(f"{AGL}/rollouts", params={"status_in": ["preparing", "queuing"]}).json()
    assert page["total"] == 3 and sum("attempt" in r for r in page["items"]) == 2


@pytest.mark.parametrize("path", [
    f"{AGL}/rollouts/ro-missing", f"{AGL}/rollouts/ro-missing/attempts/latest", f"{AGL}/resources/latest",
    f"{AGL}/resources/rs-missing", f"{AGL}/workers/nobody",
])
def test_missing_objects_are_null(http: httpx.Client, path: str) -> None:
    response = http.get(path)
    assert response.status_code == 200 and response.content == b"null"


def test_unknown_ids_give_empty_results(http: httpx.Client) -> None:
    assert http.get(f"{AGL}/rollouts/ro-missing/attempts").json()["items"] == []
    assert http.get(f"{AGL}/spans", params={"rollout_id": "ro-missing"}).json()["total"] == 0
    assert http.post(f"{AGL}/waits/rollouts", json={"rollout_ids": ["ro-missing"], "timeout": 0}).json() == []


@pytest.mark.parametrize(("method", "path", "payload", "message"), [
    ("get", "/rollouts", {"sort_by": "nope"}, "Invalid sort_by: nope"),
    ("get", "/rollouts", {"sort_order": "up"}, "Invalid sort_order: up"),
    ("get", "/rollouts", {"limit": 0}, "Limit must be"),
    ("get", "/rollouts", {"limit": -2}, "Limit must be"),
    ("get", "/rollouts", {"offset": -1}, "Offset must be"),
    ("get", "/rollouts", {"filter_logic": "xor"}, "Invalid filter_logic: xor"),
    ("post", "/rollouts/search", {"sort_by": "nope"}, "Invalid sort_by"),
    ("post", "/rollouts/search", {"sort_order": "sideways"}, "Invalid sort_order"),
    ("post", "/rollouts/search", {"filter_logic": "nand"}, "Invalid filter_logic"),
    ("post", "/rollouts/ro-1/attempts/search", {"limit": 0}, "Limit must be"),
    ("get", "/rollouts/ro-1/attempts", {"sort_by": "input"}, "Invalid sort_by"),
    ("get", "/workers", {"offset": -5}, "Offset must be"),
    ("get", "/workers", {"limit": 0}, "Limit must be"),
    ("post", "/workers/search", {"limit": 0}, "Limit must be"),
    ("post", "/workers/search", {"limit": -3}, "Limit must be"),
    ("post", "/workers/search", {"sort_by": "gpu"}, "Invalid sort_by"),
    ("get", "/resources", {"sort_by": "nope"}, "Invalid sort_by"),
    ("get", "/spans", {"rollout_id": "r", "sort_by": "nope"}, "Invalid sort_by"),
    ("post", "/spans/search", {"rollout_id": "r", "filter_logic": "x"}, "Invalid filter_logic"),
])
def test_bad_pagination_is_400(http: httpx.Client, method: str, path: str, payload: dict[str, Any],
                               message: str) -> None:
    sent = {"params": payload} if method == "get" else {"json": payload}
    response = http.request(method.upper(), AGL + path, **sent)
    assert response.status_code == 400 and message in response.json()["detail"]


@pytest.mark.parametrize(("path", "payload", "field"), [
    ("/rollouts/{rid}", {"status": None}, "status"),
    ("/rollouts/{rid}", {"config": None}, "config"),
    ("/rollouts/{rid}/attempts/latest", {"status": None}, "status"),
    ("/rollouts/{rid}/attempts/latest", {"worker_id": None}, "worker_id"),
    ("/rollouts/{rid}/attempts/latest", {"last_heartbeat_time": None}, "last_heartbeat_time"),
    ("/rollouts/{rid}/attempts/latest", {"metadata": None}, "metadata"),
    ("/workers/w1", {"heartbeat_stats": None}, "heartbeat_stats"),
])
def test_null_for_a_required_update_field_is_400(http: httpx.Client, path: str, payload: dict[str, Any],
                                                 field: str) -> None:
    rid = _start(http)["rollout_id"]
    response = http.post(AGL + path.format(rid=rid), json=payload)
    assert response.status_code == 400
    assert response.json()["detail"] == f"{field} is invalid; it cannot be a null value."


@pytest.mark.parametrize(("method", "path", "kwargs"), [
    ("post", "/rollouts", {"json": {"mode": "train"}}),  # input is required
    ("post", "/rollouts", {"json": {"input": 1, "mode": "prod"}}),
    ("post", "/queues/rollouts/enqueue", {"json": {}}),
    ("post", "/queues/rollouts/enqueue", {"json": {"rollouts": [{"input": 1, "config": {"max_attempts": 0}}]}}),
    ("post", "/rollouts/ro-1", {}),  # the update body is required
    ("post", "/rollouts/ro-1", {"json": {"status": "exploded"}}),
    ("post", "/rollouts/ro-1/attempts/latest", {}),
    ("post", "/rollouts/ro-1/attempts/latest", {"json": {"status": "queuing"}}),
    ("post", "/spans", {"json": {"name": "no ids"}}),
    ("post", "/spans/next", {"json": {"rollout_id": "ro-1"}}),
    ("post", "/resources", {"json": {"x": {"resource_type": "database"}}}),
    ("post", "/waits/rollouts", {"json": {"timeout": 1}}),
    ("get", "/rollouts", {"params": {"status_in": "bogus"}}),
    ("get", "/rollouts", {"params": {"limit": "ten"}}),
    ("get", "/spans", {}),  # rollout_id is required
    ("post", "/rollouts/search", {}),
])
def test_malformed_bodies_are_422(http: httpx.Client, method: str, path: str, kwargs: dict[str, Any]) -> None:
    response = http.request(method.upper(), AGL + path, **kwargs)
    assert response.status_code == 422, response.text
    assert isinstance(response.json()["detail"], list)


@pytest.mark.parametrize(("method", "path", "body", "message"), [
    ("post", "/rollouts/ro-missing/attempts/latest", {"status": "failed"}, "Rollout ro-missing not found"),
    ("post", "/rollouts/ro-missing", {"status": "failed"}, "does not exist"),
    ("post", "/rollouts/ro-missing/attempts", None, "Rollout ro-missing not found"),
])
def test_store_value_errors_are_400_with_the_message(http: httpx.Client, method: str, path: str,
                                                     body: Any, message: str) -> None:
    response = http.request(method.upper(), AGL + path, json=body)
    assert response.status_code == 400
    assert message in response.json()["detail"] and response.json()["error_type"] == "ValueError"


def test_unknown_attempt_and_span_for_unknown_rollout_are_400(http: httpx.Client) -> None:
    rid = _start(http)["rollout_id"]
    response = http.post(f"{AGL}/rollouts/{rid}/attempts/at-missing", json={"status": "failed"})
    assert response.status_code == 400 and "Attempt at-missing not found" in response.json()["detail"]
    span = {"rollout_id": "ro-missing", "attempt_id": "at-1", "sequence_id": 1, "trace_id": "a" * 32,
            "span_id": "b" * 16, "parent_id": None, "name": "s", "status": {"status_code": "UNSET"},
            "attributes": {}, "events": [], "links": [], "start_time": None, "end_time": None, "context": None,
            "parent": None, "resource": {"attributes": {}, "schema_url": ""}}
    response = http.post(f"{AGL}/spans", json=span)
    assert response.status_code == 400 and response.json()["error_type"] == "ValueError"


def test_experiments_are_isolated_and_validated(http: httpx.Client) -> None:
    root = _start(http)["rollout_id"]
    exp1 = _start(http, "/experiments/exp1")["rollout_id"]
    assert http.get(f"{AGL}/rollouts/{exp1}").json() is None
    assert http.get(f"/experiments/exp1{AGL}/rollouts/{root}").json() is None
    assert http.get(f"/experiments/exp1{AGL}/rollouts/{exp1}").json()["rollout_id"] == exp1
    assert http.get(f"/experiments/default{AGL}/rollouts/{root}").json()["rollout_id"] == root
    assert http.get(f"/experiments/exp2{AGL}/statistics").json()["total_rollouts"] == 0

    for bad in ("bad.name", "-leading-dash", "x" * 101, "sp%20ace"):
        response = http.get(f"/experiments/{bad}{AGL}/rollouts")
        assert response.status_code == 404 and "Invalid experiment name" in response.json()["detail"]
    assert http.get(f"/experiments/bad.name{AGL}/health").status_code == 404
    assert http.get("/experiments/exp1/v1/nothing").status_code == 404


@pytest.mark.parametrize("prefix", ["", "/experiments/exp1"])
@pytest.mark.parametrize("signal", ["metrics", "logs", "development/profiles"])
def test_other_otlp_signals_are_501(http: httpx.Client, prefix: str, signal: str) -> None:
    assert http.post(f"{prefix}/v1/{signal}", content=b"").status_code == 501


def test_metrics_count_requests_by_route_template_and_status(http: httpx.Client) -> None:
    rid = _start(http)["rollout_id"]
    http.get(f"{AGL}/rollouts/{rid}")
    http.get(f"{AGL}/rollouts/ro-other")
    http.get(f"{AGL}/rollouts", params={"limit": 0})
    http.get(f"/experiments/exp1{AGL}/rollouts/{rid}")
    http.get("/no/such/path")
    response = http.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'agl_http_requests_total{method="GET",route="/v1/agl/rollouts/{rollout_id}",status="200"} 2.0' in text
    assert 'agl_http_requests_total{method="POST",route="/v1/agl/rollouts",status="201"} 1.0' in text
    assert 'agl_http_requests_total{method="GET",route="/v1/agl/rollouts",status="400"} 1.0' in text
    assert ('agl_http_requests_total{method="GET",route="/experiments/{experiment}/v1/agl/rollouts/{rollout_id}",'
            'status="200"} 1.0') in text
    assert 'route="<unmatched>",status="404"' in text
    assert "agl_http_request_duration_seconds_bucket{" in text
    assert rid not in text  # ids never become labels


def test_server_faults_are_500_without_traceback_and_not_cached(start_server: Any, store_factory: Any) -> None:
    calls: list[str] = []

    async def flaky(experiment: str) -> Any:
        calls.append(experiment)
        if len(calls) == 1:
            raise RuntimeError("broker unreachable")
        return await store_factory(experiment)

    with httpx.Client(base_url=start_server(flaky).url) as http:
        assert http.get("/health").status_code == 200  # liveness needs no store
        failed = http.get(f"{AGL}/rollouts")
        assert failed.status_code == 500
        assert failed.json() == {"detail": "Internal server error", "error_type": "RuntimeError"}
        assert http.get(f"{AGL}/rollouts").status_code == 200  # the failed open was not cached
        assert http.get(f"{AGL}/statistics").status_code == 200
    assert calls == ["default", "default"]


def test_runner_extension_claim_runs_at_once_and_finish_checks_its_body(http: httpx.Client) -> None:
    resources = http.post(f"{AGL}/resources", json={"p": {"resource_type": "prompt_template", "template": "{x}",
                                                          "engine": "f-string"}}).json()
    [queued] = http.post(f"{AGL}/queues/rollouts/enqueue", json={"rollouts": [{"input": 1}]}).json()
    rid = queued["rollout_id"]

    claim = http.post(f"{AGL}/rollouts/{rid}/claim", json={"worker_id": "w1"}).json()
    attempt = claim["rollout"]["attempt"]
    # A runner claims only what it runs now: running at once, with a heartbeat, and told what to run with.
    assert claim["rollout"]["status"] == "running" and attempt["status"] == "running"
    assert attempt["last_heartbeat_time"] == attempt["start_time"] and attempt["worker_id"] == "w1"
    assert claim["next_sequence_id"] == 1 and claim["resources_id"] == resources["resources_id"]
    # ... with a block of span sequence ids of its own; its tracer reserves the next block in one call.
    reserved = claim["reserved_through"]
    ids = {"rollout_id": rid, "attempt_id": attempt["attempt_id"]}
    assert http.post(f"{AGL}/spans/next", json={**ids, "count": 5}).json() == {
        "sequence_id": reserved + 1}
    assert http.post(f"{AGL}/spans/next", json=ids).json() == {"sequence_id": reserved + 6}
    # The LLM proxy's first call of an attempt: its check and its id in one call; none for an unknown attempt.
    assert http.post(f"{AGL}/spans/next", json={**ids, "check_attempt": True}).json() == {"sequence_id": reserved + 7}
    unknown = http.post(f"{AGL}/spans/next", json={**ids, "attempt_id": "at-nobody", "check_attempt": True})
    assert unknown.status_code == 400 and f"its attempts: {attempt['attempt_id']}" in unknown.json()["detail"]
    assert http.post(f"{AGL}/spans/next", json=ids).json() == {"sequence_id": reserved + 8}
    again = http.post(f"{AGL}/rollouts/{rid}/claim", json={"worker_id": "w2"}).json()
    assert again == {"rollout": None, "next_sequence_id": None, "reserved_through": None, "resources_id": None}

    finish = f"{AGL}/rollouts/{rid}/attempts/{attempt['attempt_id']}/finish"
    bad = http.post(finish, json={"status": "running", "spans_through": {}})
    assert bad.status_code == 422 and "status" in bad.text
    assert http.post(finish, json={"status": "succeeded", "spans_through": {"0": -1}}).status_code == 422
    assert http.post(finish, json={"status": "succeeded", "spans_through": {"-1": 0}}).status_code == 422
    done = http.post(finish, json={"status": "succeeded", "spans_through": {}})
    assert done.status_code == 200 and done.json()["status"] == "succeeded"
    assert http.get(f"{AGL}/rollouts/{rid}").json()["status"] == "succeeded"


def test_runner_extension_claims_and_finishes_in_batches(http: httpx.Client) -> None:
    """A runner with free slots claims the tasks it took in one call and ends their attempts in one call;
    each item answers for itself (one already taken, one unknown attempt) without failing the others."""
    queued = http.post(f"{AGL}/queues/rollouts/enqueue", json={"rollouts": [{"input": i} for i in range(3)]}).json()
    first, *rest = [r["rollout_id"] for r in queued]
    assert http.post(f"{AGL}/rollouts/{first}/claim", json={"worker_id": "w0"}).json()["rollout"] is not None

    claims = http.post(f"{AGL}/claims", json={"worker_id": "w1", "rollout_ids": [first, *rest, "ro-nope"]}).json()
    assert [c["rollout"] is not None for c in claims] == [False, True, True, False]
    attempts = [(c["rollout"]["rollout_id"], c["rollout"]["attempt"]) for c in claims[1:3]]
    assert all(a["status"] == "running" and a["worker_id"] == "w1" for _, a in attempts)
    assert http.post(f"{AGL}/claims", json={"rollout_ids": []}).json() == []

    # The second as a proxied attempt's: its spans may lie anywhere, so the store folds to the topic's ends.
    finishes = [{"rollout_id": rid, "attempt_id": a["attempt_id"], "status": s, "spans_through": through}
                for (rid, a), s, through in zip(attempts, ("succeeded", "failed"), ({}, None), strict=True)]
    finishes.append({"rollout_id": rest[0], "attempt_id": "at-nope", "status": "succeeded"})
    outcomes = http.post(f"{AGL}/attempts/finish", json={"finishes": finishes}).json()
    assert [o["attempt"]["status"] for o in outcomes[:2]] == ["succeeded", "failed"]
    assert outcomes[2]["attempt"] is None and "at-nope" in outcomes[2]["error"]
    assert [http.get(f"{AGL}/rollouts/{rid}").json()["status"] for rid in rest] == ["succeeded", "failed"]
    bad = http.post(f"{AGL}/attempts/finish", json={"finishes": [{**finishes[0], "status": "running"}]})
    assert bad.status_code == 422


def test_runner_extension_finishes_name_each_attempt_once_and_real_partitions(http: httpx.Client) -> None:
    """Were taken: an attempt named twice in one batch ended twice in no set order (both outcomes said it
    ended, one of them overwritten), and a negative partition counted as folded already."""
    [queued] = http.post(f"{AGL}/queues/rollouts/enqueue", json={"rollouts": [{"input": 1}]}).json()
    [claim] = http.post(f"{AGL}/claims", json={"rollout_ids": [queued["rollout_id"]]}).json()
    finish = {"rollout_id": queued["rollout_id"], "attempt_id": claim["rollout"]["attempt"]["attempt_id"],
              "status": "succeeded"}
    twice = http.post(f"{AGL}/attempts/finish", json={"finishes": [finish, {**finish, "status": "failed"}]})
    assert twice.status_code == 422 and "named twice" in twice.text
    negative = http.post(f"{AGL}/attempts/finish", json={"finishes": [{**finish, "spans_through": {"-1": 0}}]})
    assert negative.status_code == 422 and "spans_through" in negative.text
    [outcome] = http.post(f"{AGL}/attempts/finish", json={"finishes": [finish]}).json()
    assert outcome["attempt"]["status"] == "succeeded"

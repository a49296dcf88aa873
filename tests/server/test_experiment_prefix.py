"""The experiment prefix moved into `root_path` before routing (pure ASGI, no server): what the routes and the
middlewares outside see, what stays unmatched, and the 404 of an illegal name."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from agl_events.server.experiment_prefix import ExperimentPrefixMiddleware


async def _serve(path: str, root_path: str = "") -> tuple[Scope | None, list[Message]]:
    """The scope the inner app got (None: answered before it) and what was sent."""
    seen: list[Scope] = []
    sent: list[Message] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": path, "root_path": root_path, "headers": []}
    await ExperimentPrefixMiddleware(inner)(scope, receive, send)
    return (seen[0] if seen else None), sent


@pytest.mark.parametrize("rest", ["/v1/agl/spans/next", "/v1/traces", "/ui", "/ui/data.json"])
async def test_what_the_app_serves_under_the_prefix_is_routed_as_at_the_root(rest: str) -> None:
    scope, sent = await _serve(f"/experiments/e-1{rest}")
    assert scope is not None and not sent
    # as a Mount: routing reads the path past root_path; the URL (path) is the one asked for
    assert (scope["path"], scope["root_path"], scope["app_root_path"]) == (f"/experiments/e-1{rest}",
                                                                          "/experiments/e-1", "")
    assert scope["path_params"] == {"experiment": "e-1"}


async def test_the_scope_is_changed_in_place_for_the_middlewares_outside() -> None:
    scope: dict[str, Any] = {"type": "http", "path": "/experiments/e/v1/agl/claims", "headers": []}

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = "matched"  # as the router does

    await ExperimentPrefixMiddleware(inner)(scope, None, None)  # type: ignore[arg-type]
    assert scope["route"] == "matched" and scope["path_params"] == {"experiment": "e"}


async def test_a_root_path_of_the_server_is_kept_in_front() -> None:
    scope, _ = await _serve("/api/experiments/e/v1/agl/claims", root_path="/api")
    assert scope is not None
    assert (scope["root_path"], scope["app_root_path"]) == ("/api/experiments/e", "/api")


@pytest.mark.parametrize("path", ["/v1/agl/claims", "/experiments/e/metrics", "/experiments/e", "/experiments/e/",
                                  "/experiments/e/v1x", "/metrics"])
async def test_other_paths_pass_unchanged(path: str) -> None:
    scope, _ = await _serve(path)
    assert scope is not None and scope["root_path"] == "" and "path_params" not in scope


async def test_an_illegal_experiment_name_is_a_404_with_the_rule() -> None:
    scope, sent = await _serve("/experiments/-bad/v1/agl/claims")
    assert scope is None
    assert sent[0]["status"] == 404
    assert "letter or digit" in json.loads(sent[1]["body"])["detail"]

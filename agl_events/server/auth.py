"""Optional bearer tokens on the store server: one for the whole server, or one per experiment.

The experiment a request addresses decides which token it needs: `/experiments/<name>/...` is experiment
`<name>`, the root API (`/v1/agl/...`, `/v1/traces`) is the default experiment, and everything else
(`/metrics`, the OpenAPI pages) is server-wide. An experiment with a token of its own needs that one; any
other needs the global token; with neither, it is open, as a server without tokens is. The global token is
a default, not a master key, so experiments with tokens of their own stay apart. `/health` is always open:
probes carry no secrets.

A client presents the token as `Authorization: Bearer <token>`, or as the password of HTTP basic auth
(any user name): Agent Lightning's `LightningStoreClient` cannot set headers, but aiohttp sends the
credentials of a URL such as `http://agl:<token>@host:4747`, and so does the OTLP exporter (requests).
Tokens are compared in constant time. The `/ui` page also takes `?token=<token>` (`query_token`).

The check is an ASGI middleware ahead of routing, so no route can be added without it.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

#: Paths that never need a token.
OPEN_PATHS = frozenset({"/health"})
_EXPERIMENT_PATH = "/experiments/"
#: Root paths that address the default experiment (Agent Lightning's API and OTLP, the `/ui` page's data).
_DEFAULT_EXPERIMENT_PATHS = ("/v1/", "/ui/")
#: The page a browser opens (`server.ui`): it cannot send a header, so a `token` query parameter is taken.
_UI_PAGE, _UI_DATA = "/ui", "/ui/data.json"


@dataclass(frozen=True)
class AuthTokens:
    """Who may call the server: `token` for the whole server, `experiments` maps names to their own token."""

    token: str | None = field(default=None, repr=False)
    experiments: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def enabled(self) -> bool:
        return self.token is not None or bool(self.experiments)

    def required_for(self, experiment: str | None) -> str | None:
        """The token a request to `experiment` (None: server-wide) needs, or None when it is open."""
        if experiment is not None and experiment in self.experiments:
            return self.experiments[experiment]
        return self.token

    def __repr__(self) -> str:  # names, never tokens
        return f"AuthTokens(global={self.token is not None}, experiments={sorted(self.experiments)})"


class AuthConfigError(ValueError):
    """The token settings cannot be used; the message never quotes a token."""


def load_experiment_tokens(path: Path) -> dict[str, str]:
    """The per-experiment tokens in `path`: one JSON object, experiment name -> token."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise AuthConfigError(f"cannot read the token file {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise AuthConfigError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) and v for v in data.values()):
        raise AuthConfigError(f"{path}: expected a JSON object mapping experiment names to non-empty tokens")
    return {str(name): token for name, token in data.items()}


def experiment_of(path: str, default_experiment: str) -> str | None:
    """The experiment a request path addresses; None for server-wide paths. Read the way the router reads
    it (the segment after `/experiments/`), so the token checked is the one of the experiment served."""
    if path.startswith(_EXPERIMENT_PATH):
        return path[len(_EXPERIMENT_PATH):].split("/", 1)[0]
    if path.startswith(_DEFAULT_EXPERIMENT_PATHS) or path == _UI_PAGE:
        return default_experiment
    return None


def query_token(scope: Scope) -> str | None:
    """The `token` query parameter, for the `/ui` page and its data only: a browser opening the page cannot
    send a header. It shows in the address bar and in access logs, so it is refused everywhere else."""
    path = scope["path"]
    if path.startswith(_EXPERIMENT_PATH):  # /experiments/<name>/ui...: the part after the experiment's name
        path = "/" + path[len(_EXPERIMENT_PATH):].partition("/")[2]
    if path not in (_UI_PAGE, _UI_DATA):
        return None
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[-1] if values else None


def presented_token(authorization: str | None) -> str | None:
    """The token in an `Authorization` header: a bearer token, or the password of basic auth."""
    if not authorization:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return credentials.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


def token_matches(presented: str | None, required: str) -> bool:
    """Constant-time comparison, so response times say nothing about how much of a guess was right."""
    return presented is not None and hmac.compare_digest(presented.encode(), required.encode())


class AuthMiddleware:
    """Refuse HTTP requests without the token their experiment needs: 401, a JSON reason, `WWW-Authenticate`."""

    def __init__(self, app: ASGIApp, tokens: AuthTokens, default_experiment: str) -> None:
        self.app = app
        self.tokens = tokens
        self.default_experiment = default_experiment

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        required = self.tokens.required_for(experiment_of(scope["path"], self.default_experiment))
        if required is None:
            await self.app(scope, receive, send)
            return
        presented = presented_token(_header(scope, b"authorization")) or query_token(scope)
        if token_matches(presented, required):
            await self.app(scope, receive, send)
            return
        await _refuse(send, presented is not None)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _refuse(send: Send, wrong_token: bool) -> None:
    """401 as RFC 6750 has it: a request that brought no token gets the challenge alone, a wrong one its error."""
    reason = "invalid token" if wrong_token else "missing token"
    body = json.dumps({"detail": f"{reason}: send 'Authorization: Bearer <token>'"}).encode()
    challenge = 'Bearer realm="agl-events"' + (', error="invalid_token"' if wrong_token else "")
    headers: list[Any] = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                          (b"www-authenticate", challenge.encode())]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})

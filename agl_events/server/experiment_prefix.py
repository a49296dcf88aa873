"""Requests under `/experiments/{experiment}` served by the root routes, as a Starlette `Mount` would serve them.

The app documents every store route twice, at the root (the default experiment, Agent Lightning's paths) and
under `/experiments/{experiment}`. FastAPI (0.16x) matches a request against its routes one by one, each
included router's in turn, so a request under the prefix was matched against all ~40 root routes first and
then the prefixed ones up to its own: routing took about a third of the ~550 µs a request cost. This middleware moves
the prefix into `root_path` (and the name into `path_params`, where the routes' store dependency reads it),
so such a request is matched against the root routes only, as a mounted sub-application's would be.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agl_events.server.experiments import check_experiment_name

PREFIX = "/experiments/"


class ExperimentPrefixMiddleware:
    """Pure ASGI. Only what the app serves under the prefix moves: the store API and OTLP (`/v1/...`) and the
    `/ui` page; anything else there (`/experiments/x/metrics`) stays unmatched, a 404, as before. An illegal
    experiment name is a 404 with the naming rule, as the prefixed routes' dependency answers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (path := _route_path(scope)).startswith(PREFIX):
            name, slash, rest = path[len(PREFIX):].partition("/")
            if slash and (rest.startswith("v1/") or rest == "ui" or rest.startswith("ui/")):
                try:
                    check_experiment_name(name)
                except ValueError as exc:
                    await JSONResponse({"detail": str(exc)}, status_code=404)(scope, receive, send)
                    return
                # In place, as routing does: the middlewares outside read the matched route from this scope.
                root = scope.get("root_path", "")
                scope["app_root_path"] = scope.get("app_root_path", root)
                scope["root_path"] = root + PREFIX + name
                scope["path_params"] = {**scope.get("path_params", {}), "experiment": name}
        await self.app(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The path routing reads: past the `root_path` a server behind a proxy may have been given."""
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root + "/") else path

"""`/ui`: one self-contained page showing an experiment at a glance, and `/ui/data.json`, what it polls.

The page (`ui.html`, inline CSS and JS, no external resource: it must work on a closed network) draws its own
SVG chart and polls the JSON next to it every 2 s, computing rates from two readings. Both routes are
mounted at the root (the default experiment) and under `/experiments/<name>`, as the API is. With tokens on
the server, a browser cannot send a header: `/ui?token=<token>` is accepted for these two routes (the page
passes it on to its data), see `server.auth`.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from agl_events.server.experiments import ExperimentStores
from agl_events.server.store_figures import ExperimentFigures, StoreFigures

PAGE = files("agl_events.server").joinpath("ui.html").read_text(encoding="utf-8")


def create_ui_router(experiments: ExperimentStores, figures: StoreFigures) -> APIRouter:
    router = APIRouter()

    @router.get("/ui", response_class=HTMLResponse)
    async def ui_page() -> HTMLResponse:
        """The page; it opens no store itself (its data does)."""
        return HTMLResponse(PAGE)

    @router.get("/ui/data.json")
    async def ui_data(request: Request) -> ExperimentFigures:
        """The experiment's figures now (its store is opened on first use, as by any API call)."""
        name = experiments.resolve_name(request.path_params.get("experiment"))
        return figures.figures(name, await experiments.get(name))

    return router

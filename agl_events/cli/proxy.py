"""`agl-events proxy`: the LLM proxy on its own, in front of the backends of a LiteLLM model list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from agl_events.broker.local import ensure_broker
from agl_events.cli.context import AuthToken, settings
from agl_events.server.client import experiment_url


def proxy(
    ctx: typer.Context,
    model_list: Annotated[Path, typer.Option("--model-list", exists=True, dir_okay=False,
                                             help="LiteLLM model list (YAML or JSON; a LiteLLM config works).")],
    host: Annotated[str, typer.Option(help="Interface to listen on; 0.0.0.0 lets agents on other machines in.")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port (LiteLLM's default).")] = 4000,
    store_url: Annotated[str, typer.Option("--store-url", envvar="AGL_STORE_URL",
                                           help="The agl-events store server (it hands out sequence ids).")
                         ] = "http://127.0.0.1:4747",
    auth_token: AuthToken = None,
    request_timeout: Annotated[float, typer.Option(help="Seconds a backend may take for one call.")] = 600.0,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve an OpenAI-compatible endpoint per rollout attempt (/rollout/<rid>/attempt/<aid>/v1) that records
    every call, with token ids and logprobs, as spans of that attempt."""
    from agl_events.llm.app import create_proxy_app  # imports litellm: only this command pays for it
    from agl_events.llm.model_list import load_model_list
    from agl_events.llm.routing import ModelRouter

    cfg = settings(ctx, auth_token)  # the proxy's calls to the store send its token
    cfg = cfg.model_copy(update={"bootstrap": ensure_broker(cfg)})
    try:
        router = ModelRouter(load_model_list(model_list))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--model-list") from exc
    url = experiment_url(store_url, cfg.experiment)
    typer.echo(f"agl-events LLM proxy on http://{host}:{port}/rollout/<rollout_id>/attempt/<attempt_id>/v1 "
               f"(models: {', '.join(router.names)}; store {url}; Kafka {cfg.bootstrap_servers})")
    app = create_proxy_app(router, url, cfg, request_timeout=request_timeout)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False, timeout_keep_alive=30)

"""Access to the resolved settings from any sub-command."""

from __future__ import annotations

from typing import Annotated

import typer

from agl_events.config import Settings

#: The `--store-url` option of commands that talk to a store server.
StoreUrl = Annotated[str, typer.Option("--store-url", envvar="AGL_STORE_URL", help="The agl-events store server.")]
DEFAULT_STORE_URL = "http://127.0.0.1:4747"


def settings(ctx: typer.Context) -> Settings:
    """The settings resolved by the global callback (falls back to the environment)."""
    root = ctx.find_root()
    obj = root.obj
    return obj if isinstance(obj, Settings) else Settings.from_env()

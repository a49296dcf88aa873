"""Access to the resolved settings from any sub-command."""

from __future__ import annotations

import typer

from agl_events.config import Settings


def settings(ctx: typer.Context) -> Settings:
    """The settings resolved by the global callback (falls back to the environment)."""
    root = ctx.find_root()
    obj = root.obj
    return obj if isinstance(obj, Settings) else Settings.from_env()

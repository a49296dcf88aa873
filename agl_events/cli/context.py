"""Access to the resolved settings from any sub-command."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from agl_events.config import Settings
from agl_events.server.client import StoreClient, StoreUnavailableError

T = TypeVar("T")

#: The `--store-url` option of commands that talk to a store server.
StoreUrl = Annotated[str, typer.Option("--store-url", envvar="AGL_STORE_URL", help="The agl-events store server.")]
DEFAULT_STORE_URL = "http://127.0.0.1:4747"


def settings(ctx: typer.Context) -> Settings:
    """The settings resolved by the global callback (falls back to the environment)."""
    root = ctx.find_root()
    obj = root.obj
    return obj if isinstance(obj, Settings) else Settings.from_env()


def ask_store(url: str, call: Callable[[StoreClient], Awaitable[T]], console: Console) -> T:
    """`call` with a client of the store at `url` (closed after); an unreachable store is one red line and
    exit status 2."""
    async def run() -> T:
        client = StoreClient(url)
        try:
            return await call(client)
        finally:
            await client.close()

    try:
        return asyncio.run(run())
    except StoreUnavailableError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc

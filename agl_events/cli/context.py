"""Access to the resolved settings from any sub-command."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from pydantic import SecretStr
from rich.console import Console

from agl_events.config import Settings
from agl_events.server.client import StoreClient, StoreUnavailableError

T = TypeVar("T")

#: The `--store-url` option of commands that talk to a store server.
StoreUrl = Annotated[str, typer.Option("--store-url", envvar="AGL_STORE_URL", help="The agl-events store server.")]
DEFAULT_STORE_URL = "http://127.0.0.1:4747"
#: The `--auth-token` option: the store server's bearer token (commands that serve one check it, those that
#: talk to one send it).
AuthToken = Annotated[str | None, typer.Option("--auth-token", envvar="AGL_AUTH_TOKEN", show_default=False,
                                               help="Bearer token of the store server (unset: none).")]


def settings(ctx: typer.Context, auth_token: str | None = None) -> Settings:
    """The settings resolved by the global callback (falls back to the environment); a command's
    `--auth-token` replaces the token."""
    root = ctx.find_root()
    obj = root.obj
    found = obj if isinstance(obj, Settings) else Settings.from_env()
    return found if not auth_token else found.model_copy(update={"auth_token": SecretStr(auth_token)})


def ask_store(url: str, call: Callable[[StoreClient], Awaitable[T]], console: Console,
              auth_token: str | None = None) -> T:
    """`call` with a client of the store at `url` (closed after); an unreachable store, or one refusing the
    token, is one red line and exit status 2."""
    async def run() -> T:
        client = StoreClient(url, auth_token=auth_token)
        try:
            return await call(client)
        finally:
            await client.close()

    try:
        return asyncio.run(run())
    except StoreUnavailableError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc

"""An ASGI app served on a free loopback port in a thread of its own: the backends tests and benches start.

The fake vLLM-like backend and the torch policy server both run next to the code that calls them (a test,
a bench, a trainer), so they share this: bind first (the URL is known before the thread starts), serve on
the thread's own event loop, and stop cleanly.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, Self

import uvicorn


class LoopbackServer:
    """Serves `app` on `host` at a free port; `url` is its OpenAI-style base (`http://host:port/v1`)."""

    def __init__(self, app: Any, *, name: str, host: str = "127.0.0.1") -> None:
        self.app = app
        self._name = name
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.url = f"http://{host}:{self._sock.getsockname()[1]}/v1"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=[self._sock])),
                                        name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self._name} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

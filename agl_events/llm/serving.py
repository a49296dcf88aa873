"""Where the LLM proxy's server runs: on a thread of the caller's process, or in a process of its own.

A thread starts in well under a second and shares nothing that needs copying, which suits tests and small
jobs. But a trainer's process already serves the store and a policy, and every proxied call is HTTP parsing,
JSON and span encoding under the same GIL: there the proxy's own process (Agent Lightning's `LLMProxy`
default, `launch_mode="mp"`) takes it off that core, at the price of a few seconds to start (the child imports
LiteLLM). Both serve on a socket the caller has already bound, so the port is known before either starts;
they own it from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import signal
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Literal

import uvicorn

from agl_events.config import Settings
from agl_events.llm.model_list import ModelConfig

LaunchMode = Literal["thread", "mp"]

#: How long a start may take: a thread's is under a second; a process imports LiteLLM (~4 s on two cores)
#: and more when the machine is busy.
THREAD_START_SECONDS = 30.0
PROCESS_START_SECONDS = 120.0
#: How long a stop waits for calls in flight and the producer's flush before giving up on them.
STOP_SECONDS = 30.0


@dataclass(frozen=True)
class ProxySpec:
    """What a proxy serves: its model list, the store and log it records into, its backends' timeout.

    Plain data, so a spawned process can be handed it and build the same app there."""

    model_list: list[ModelConfig]
    store_url: str
    settings: Settings
    request_timeout: float

    def server(self) -> uvicorn.Server:
        """A uvicorn server of the proxy's app, not started. The app's modules (LiteLLM's among them, seconds
        to import) are imported here, where it serves: a caller whose proxy runs in "mp" never needs them."""
        from agl_events.llm.app import create_proxy_app
        from agl_events.llm.routing import ModelRouter

        app = create_proxy_app(ModelRouter(self.model_list), self.store_url, self.settings,
                               request_timeout=self.request_timeout)
        return uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=30))


def listening_socket(host: str, port: int | None) -> socket.socket:
    """A TCP socket bound to `host:port` (`None`: a free port); uvicorn listens on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY from asyncio
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port or 0))
    return sock


class Serving(ABC):
    """A started proxy server, however it runs."""

    @abstractmethod
    def running(self) -> bool:
        """Whether it still serves: started, not asked to stop, and (a process) alive."""

    @abstractmethod
    def stop(self) -> None:
        """Stop serving: calls in flight finish (their spans written), the producer is flushed; returns when
        done or after `STOP_SECONDS`. Stopping twice is harmless."""


class ServingThread(Serving):
    """uvicorn on a thread and event loop of its own: a slow agent on the caller's loop never delays a call."""

    def __init__(self, spec: ProxySpec, sock: socket.socket) -> None:
        """Starts serving on `sock`; returns once the proxy accepts requests, or raises `RuntimeError`."""
        try:
            server = spec.server()
        except BaseException:
            sock.close()
            raise
        self._server, self._sock = server, sock
        self._thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])),
                                        name="llm-proxy", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + THREAD_START_SECONDS
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the LLM proxy did not start (see the log for why)")
            time.sleep(0.01)

    def running(self) -> bool:
        return self._server.started and not self._server.should_exit and self._thread.is_alive()

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=STOP_SECONDS)
        self._sock.close()


class ServingProcess(Serving):
    """A spawned process serving the proxy on a thread of its own, until told to stop or its parent is gone.

    Spawned, not forked: the caller's process has Kafka clients and threads that a fork would copy
    half-way. The child says once it serves (or why it could not); it stops when it reads anything on the
    pipe or finds the pipe closed (the parent died), flushing its spans either way. It ignores Ctrl-C, which
    the terminal sends the whole process group: the parent stops it as it unwinds, after its own calls."""

    def __init__(self, spec: ProxySpec, sock: socket.socket) -> None:
        """Starts the process serving on (a copy of) `sock`; returns once it accepts requests, or raises
        `RuntimeError` with the child's reason."""
        context = multiprocessing.get_context("spawn")
        self._pipe, child_end = context.Pipe()
        self._process = context.Process(target=_serve_until_told, args=(spec, sock, child_end), name="llm-proxy",
                                        daemon=True)
        try:
            self._process.start()
        finally:
            sock.close()  # the child has its own copy: this one would only keep the port open after it stops
            child_end.close()
        failure = "it exited"
        if self._pipe.poll(PROCESS_START_SECONDS):
            with contextlib.suppress(EOFError):
                failure = self._pipe.recv()
        else:
            failure = f"no answer within {PROCESS_START_SECONDS:.0f} s"
        if failure:
            self.stop()
            raise RuntimeError(f"the LLM proxy's process did not start: {failure}")

    def running(self) -> bool:
        return self._process.is_alive() and not self._pipe.closed

    def stop(self) -> None:
        if not self._pipe.closed:
            with contextlib.suppress(OSError):  # the child is gone already
                self._pipe.send("stop")
            self._pipe.close()
        self._process.join(timeout=STOP_SECONDS)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def _serve_until_told(spec: ProxySpec, sock: socket.socket, pipe: Connection) -> None:
    """The child's body: serve, say so (an empty reason), wait for the word, stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        serving = ServingThread(spec, sock)
    except Exception as exc:  # the parent raises it, with this reason
        pipe.send(f"{type(exc).__name__}: {exc}")
        return
    pipe.send("")
    with contextlib.suppress(EOFError):  # EOF: the parent is gone
        pipe.recv()
    serving.stop()


#: Each launch mode's server: `SERVINGS[mode](spec, sock)` starts one.
SERVINGS: dict[LaunchMode, Callable[[ProxySpec, socket.socket], Serving]] = {
    "thread": ServingThread, "mp": ServingProcess}

"""`LLMProxy`: upstream's LLM proxy in-process, serving on its own thread and event loop.

Its own loop keeps it independent of the caller: a sync trainer, a test or an algorithm with a loop of
its own all start and stop it the same way, and a slow agent on the caller's loop never delays a call.
`as_resource` gives what runners hand agents: a `ProxyLLM` (the runner resolves it per rollout) or the
`LLM` of one rollout attempt, as upstream's `LLMProxy.as_resource` does.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn

from agl_events.config import Settings
from agl_events.llm.app import create_proxy_app
from agl_events.llm.model_list import ModelConfig
from agl_events.llm.routing import ModelRouter
from agl_events.types import LLM, ProxyLLM, proxy_base_url


class LLMProxy:
    """An OpenAI-compatible proxy recording every call of a rollout attempt as spans on the experiment's log.

    `store_url` is the experiment's URL on the store server (as runners get it); `settings` name the Kafka
    cluster and experiment (default: from the environment). `port=None` takes a free port.
    """

    def __init__(self, model_list: list[ModelConfig] | list[dict[str, Any]], store_url: str,
                 settings: Settings | None = None, *, host: str = "127.0.0.1", port: int | None = None,
                 request_timeout: float = 600.0) -> None:
        self.model_list = [ModelConfig.model_validate(m) for m in model_list]
        self.router = ModelRouter(self.model_list)  # refuses a bad model list here, not on the first call
        self.store_url = store_url
        self.settings = settings or Settings.from_env()
        self.host = host
        self.port = port
        self.request_timeout = request_timeout
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def url(self) -> str:
        """Where the proxy listens (known once started when the port was left to the system)."""
        if self.port is None:
            raise RuntimeError("the proxy has no port yet: start it first")
        return f"http://{self.host}:{self.port}"

    def start(self) -> LLMProxy:
        """Serve on a background thread; returns once the proxy accepts requests."""
        if self._server is not None:
            raise RuntimeError("the proxy is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY from asyncio
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port or 0))
        self.port = sock.getsockname()[1]
        app = create_proxy_app(self.router, self.store_url, self.settings, request_timeout=self.request_timeout)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=30))
        thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), name="llm-proxy",
                                  daemon=True)
        self._server, self._thread, self._sock = server, thread, sock
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the LLM proxy did not start (see the log for why)")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving: calls in flight finish (their spans written), then the producer is flushed."""
        if self._server is None:
            return
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None

    def is_running(self) -> bool:
        return self._server is not None and self._server.started and not self._server.should_exit

    def __enter__(self) -> LLMProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def as_resource(self, rollout_id: str | None = None, attempt_id: str | None = None, model: str | None = None,
                    sampling_parameters: dict[str, Any] | None = None) -> LLM:
        """A `ProxyLLM` at `<proxy>/v1` (no ids), or the `LLM` of one attempt at
        `<proxy>/rollout/<rid>/attempt/<aid>/v1`. `model` may be left out when the list names one model."""
        names = self.router.names
        if model is None:
            if len(names) != 1:
                raise ValueError(f"the model list names several models ({', '.join(names)}): say which one")
            model = names[0]
        endpoint = f"{self.url}/v1"
        parameters = dict(sampling_parameters or {})
        if rollout_id is None and attempt_id is None:
            return ProxyLLM(endpoint=endpoint, model=model, sampling_parameters=parameters)
        if rollout_id is None or attempt_id is None:
            raise ValueError("give both rollout_id and attempt_id, or neither")
        return LLM(endpoint=proxy_base_url(endpoint, rollout_id, attempt_id), model=model,
                   sampling_parameters=parameters)

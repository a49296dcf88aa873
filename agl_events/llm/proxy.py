"""`LLMProxy`: upstream's LLM proxy, serving on a thread of its own or in a process of its own.

Either way it has its own event loop, which keeps it independent of the caller: a sync trainer, a test or an
algorithm with a loop of its own all start and stop it the same way, and a slow agent on the caller's loop
never delays a call. `launch_mode` says which (`serving.py`): "thread" (the default: starts at once) or "mp",
Agent Lightning's default, for a process that is busy with other work, as a trainer is. `as_resource` gives
what runners hand agents: a `ProxyLLM` (the runner resolves it per rollout) or the `LLM` of one rollout
attempt, as upstream's `LLMProxy.as_resource` does.
"""

from __future__ import annotations

from typing import Any

from agl_events.config import Settings
from agl_events.llm.model_list import ModelConfig, model_names
from agl_events.llm.serving import SERVINGS, LaunchMode, ProxySpec, Serving, listening_socket
from agl_events.types import LLM, ProxyLLM, proxy_base_url


class LLMProxy:
    """An OpenAI-compatible proxy recording every call of a rollout attempt as spans on the experiment's log.

    `store_url` is the experiment's URL on the store server (as runners get it); `settings` name the Kafka
    cluster and experiment (default: from the environment). `port=None` takes a free port.
    """

    def __init__(self, model_list: list[ModelConfig] | list[dict[str, Any]], store_url: str,
                 settings: Settings | None = None, *, host: str = "127.0.0.1", port: int | None = None,
                 request_timeout: float = 600.0, launch_mode: LaunchMode = "thread") -> None:
        if launch_mode not in SERVINGS:
            raise ValueError(f"unknown launch mode {launch_mode!r}: one of {', '.join(SERVINGS)}")
        self.model_list = [ModelConfig.model_validate(m) for m in model_list]
        # What agents may ask for. The deployments are resolved (LiteLLM) where the proxy serves, as it
        # starts: a bad entry fails `start()`, and the process of a proxy in "mp" never imports LiteLLM.
        self.model_names = model_names(self.model_list)
        self.store_url = store_url
        self.settings = settings or Settings.from_env()
        self.host = host
        self.port = port
        self.request_timeout = request_timeout
        self.launch_mode: LaunchMode = launch_mode
        self._serving: Serving | None = None

    @property
    def url(self) -> str:
        """Where the proxy listens (known once started when the port was left to the system)."""
        if self.port is None:
            raise RuntimeError("the proxy has no port yet: start it first")
        return f"http://{self.host}:{self.port}"

    def start(self) -> LLMProxy:
        """Start serving; returns once the proxy accepts requests."""
        if self._serving is not None:
            raise RuntimeError("the proxy is already running")
        spec = ProxySpec(self.model_list, self.store_url, self.settings, self.request_timeout)
        sock = listening_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        self._serving = SERVINGS[self.launch_mode](spec, sock)
        return self

    def stop(self) -> None:
        """Stop serving: calls in flight finish (their spans written), then the producer is flushed."""
        if self._serving is not None:
            self._serving.stop()
            self._serving = None

    def is_running(self) -> bool:
        return self._serving is not None and self._serving.running()

    def __enter__(self) -> LLMProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def as_resource(self, rollout_id: str | None = None, attempt_id: str | None = None, model: str | None = None,
                    sampling_parameters: dict[str, Any] | None = None) -> LLM:
        """A `ProxyLLM` at `<proxy>/v1` (no ids), or the `LLM` of one attempt at
        `<proxy>/rollout/<rid>/attempt/<aid>/v1`. `model` may be left out when the list names one model."""
        names = self.model_names
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

"""Which backend serves a call: LiteLLM's Router over the model list, resolved to an OpenAI-compatible URL.

LiteLLM does what it is good at here: reading the model list (`os.environ/...` keys, several deployments
under one name, its routing strategies) and knowing each provider's endpoint and key. The call itself is
forwarded as it came (see `forward.py`), not through `litellm.acompletion`: LiteLLM's response translation
drops vLLM's own `choices[i].token_ids` (keeping them only under `provider_specific_fields`) and, when
streaming, every chunk's token ids, and training needs exactly what the backend sent. The answer is then
given LiteLLM's shape as well (`answer.py`), so clients written for Agent Lightning's proxy find the token ids
where they look. So only OpenAI-compatible deployments are accepted (openai/, hosted_vllm/, and every
provider LiteLLM resolves to an OpenAI-style base URL, or any with an explicit `api_base`); they are checked
when the proxy starts, not on the first call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else importing litellm fetches a price list online

import litellm

from agl_events.llm.model_list import ModelConfig, model_names

OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"
# Providers whose chat calls LiteLLM makes with the OpenAI SDK: its raw span then shows the request as the
# SDK's arguments, the parameters the SDK does not name under `extra_body`. Other OpenAI-compatible
# providers (hosted_vllm, ...) go through LiteLLM's own HTTP handler, whose raw request is flat.
SDK_CHAT_PROVIDERS = frozenset({"openai", "azure"})
REQUEST_FIELDS = frozenset({"model", "messages"})


class UnknownModelError(LookupError):
    """The agent asked for a model the proxy's model list does not name."""


@dataclass(frozen=True)
class Deployment:
    """One backend of the model list, ready to forward to."""

    model_name: str  # what agents ask for
    backend_model: str  # what the backend is told (the model list's `model` without its provider prefix)
    provider: str  # LiteLLM's provider name (hosted_vllm, openai, ...): it names the raw span attributes
    api_base: str
    api_key: str | None
    timeout: float | None
    asks_token_ids: bool
    asks_logprobs: bool
    extra_headers: dict[str, str] = field(default_factory=dict)
    sdk_params: frozenset[str] | None = None  # what LiteLLM names to the OpenAI SDK for chat; None: flat

    def extra_body(self, kind: str, sent: dict[str, Any]) -> frozenset[str]:
        """The keys of `sent` that LiteLLM's raw span shows under `extra_body` (none but for SDK providers' chat)."""
        if kind != "chat" or self.sdk_params is None:
            return frozenset()
        return frozenset(key for key in sent if key not in self.sdk_params)

    def url(self, endpoint: str) -> str:
        """`endpoint` ("chat/completions", "completions") under this backend's base URL."""
        return f"{self.api_base.rstrip('/')}/{endpoint}"

    def headers(self) -> dict[str, str]:
        auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return {**auth, **self.extra_headers}


def resolve(entry: dict[str, Any]) -> Deployment:
    """A Router model-list entry (keys already resolved from `os.environ/...`) as a Deployment."""
    params, info = entry["litellm_params"], entry.get("model_info") or {}
    name = entry["model_name"]
    backend_model, provider, key, api_base = litellm.get_llm_provider(
        model=params["model"], custom_llm_provider=params.get("custom_llm_provider"),
        api_base=params.get("api_base"), api_key=params.get("api_key"))
    if provider == "openai" and not api_base:
        api_base = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or OPENAI_DEFAULT_BASE
        key = key or os.environ.get("OPENAI_API_KEY")
    if not api_base:
        raise ValueError(f"model {name!r} ({params['model']}): LiteLLM knows no OpenAI-compatible endpoint for "
                         f"provider {provider!r}; give litellm_params.api_base (the proxy forwards OpenAI-style "
                         "requests as they are, so the backend must speak the OpenAI API)")
    timeout = params.get("timeout")
    config = ModelConfig(model_name=name, litellm_params=params, model_info=info)
    return Deployment(model_name=name, backend_model=backend_model, provider=provider, api_base=api_base,
                      api_key=params.get("api_key") or key, timeout=float(timeout) if timeout else None,
                      asks_token_ids=config.asks_token_ids, asks_logprobs=config.asks_logprobs,
                      extra_headers={str(k): str(v) for k, v in (params.get("extra_headers") or {}).items()},
                      sdk_params=_sdk_params(backend_model, provider))


def _sdk_params(backend_model: str, provider: str) -> frozenset[str] | None:
    if provider not in SDK_CHAT_PROVIDERS:
        return None
    named = litellm.get_supported_openai_params(model=backend_model, custom_llm_provider=provider) or []
    return REQUEST_FIELDS | frozenset(named)


class ModelRouter:
    """Picks a deployment for a model name with LiteLLM's Router (several per name are load-balanced)."""

    def __init__(self, models: list[ModelConfig]) -> None:
        self.names = model_names(models)
        self._router = litellm.Router(model_list=[m.model_dump() for m in models])
        self._deployments = {entry["model_info"]["id"]: resolve(entry) for entry in self._router.model_list}

    async def route(self, model: Any) -> Deployment:
        if model not in self.names:
            raise UnknownModelError(f"model {model!r} is not in the proxy's model list; it serves: "
                                    f"{', '.join(self.names)}")
        chosen = await self._router.async_get_available_deployment(model=model, request_kwargs={})
        return self._deployments[chosen["model_info"]["id"]]

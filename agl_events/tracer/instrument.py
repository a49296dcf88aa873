"""The openai client instrumented as Agent Lightning 0.3.0's runners instrument it, so an agent that calls its
LLM directly (no LLM proxy) leaves `openai.chat.completion` spans the triplet adapter turns into triplets.

Upstream's default tracer (`AgentOpsTracer`) uses AgentOps' OpenAI instrumentation and patches its attribute
function to add what a vLLM backend returns beside the OpenAI fields. We use the same instrumentation (so the
span name and the `gen_ai.prompt.N.*`, `gen_ai.completion.N.*`, `gen_ai.request.*`, `gen_ai.response.*`
attributes are the ones upstream's adapters read) and add the same extra attributes without patching
AgentOps: a wrapper around `create` installed *inside* AgentOps' own, so the span AgentOps made current is
the one it annotates:

- `prompt_token_ids`: the response's top-level `prompt_token_ids` (vLLM's `return_token_ids`);
- `response_token_ids`: the first choice's tokens: older vLLM's top-level `response_token_ids[0]`, else
  `choices[0].token_ids`, else `choices[0].provider_specific_fields.token_ids` (LiteLLM's place for them);
- `logprobs.content` / `logprobs.refusal`: the first choice's logprobs as JSON text.

Streamed calls and `with_raw_response` calls get AgentOps' attributes only (no token ids), as upstream; AgentOps
also asks streamed calls for a closing usage chunk (`stream_options.include_usage`) unless the environment says
`TRACELOOP_METRICS_ENABLED=false`, as under upstream's runners.
Instrumenting patches the openai module for the whole process, so only a process that is a runner's own does
it (see `Runner`); it happens once per process.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

log = logging.getLogger(__name__)

_CHAT = "openai.resources.chat.completions"
_once = threading.Lock()
_done = False


def token_attributes(response: Any) -> dict[str, Any]:
    """The span attributes upstream's token-id patch records for a chat completion (empty for anything else)."""
    from openai.types.chat import ChatCompletion

    if not isinstance(response, ChatCompletion):
        return {}
    extra = response.model_extra or {}
    attributes: dict[str, Any] = {}
    if extra.get("prompt_token_ids") is not None:
        attributes["prompt_token_ids"] = list(extra["prompt_token_ids"])
    if extra.get("response_token_ids") is not None:
        attributes["response_token_ids"] = list(extra["response_token_ids"][0])
    if not response.choices:
        return attributes
    first = response.choices[0]
    choice_extra = first.model_extra or {}
    provider_fields = choice_extra.get("provider_specific_fields") or {}
    if "response_token_ids" not in attributes:
        if choice_extra.get("token_ids") is not None:
            attributes["response_token_ids"] = list(choice_extra["token_ids"])
        elif provider_fields.get("token_ids") is not None:
            attributes["response_token_ids"] = list(provider_fields["token_ids"])
    if first.logprobs is not None:
        if first.logprobs.content is not None:
            attributes["logprobs.content"] = json.dumps([entry.model_dump() for entry in first.logprobs.content])
        if first.logprobs.refusal is not None:
            attributes["logprobs.refusal"] = json.dumps([entry.model_dump() for entry in first.logprobs.refusal])
    return attributes


def _annotate(response: Any) -> None:
    span = trace.get_current_span()  # AgentOps' openai.chat.completion span, made current around our wrapper
    if span.is_recording() and is_instrumentation_enabled():
        span.set_attributes(token_attributes(response))


def _with_token_ids(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    response = wrapped(*args, **kwargs)
    _annotate(response)
    return response


async def _with_token_ids_async(wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...],
                                kwargs: dict[str, Any]) -> Any:
    response = await wrapped(*args, **kwargs)
    _annotate(response)
    return response


def instrument_openai(provider: trace.TracerProvider) -> None:
    """Instrument the openai client (sync and async chat completions, and the rest AgentOps covers) into
    `provider`, once per process. When the agent's own code instrumented it already (AgentOps set up there),
    that is left as it is: its spans are recorded, without token ids unless that code adds them."""
    global _done
    from agentops.instrumentation.providers.openai.instrumentor import OpenaiInstrumentor
    from wrapt import wrap_function_wrapper

    with _once:
        if _done:
            return
        instrumentor = OpenaiInstrumentor()
        if instrumentor.is_instrumented_by_opentelemetry:
            log.warning("the openai client is already instrumented in this process: its spans are recorded, "
                        "without vLLM's token ids unless the agent's own instrumentation adds them")
            return
        wrap_function_wrapper(_CHAT, "Completions.create", _with_token_ids)  # first: AgentOps' wraps it
        wrap_function_wrapper(_CHAT, "AsyncCompletions.create", _with_token_ids_async)
        instrumentor.instrument(tracer_provider=provider)
        _done = True

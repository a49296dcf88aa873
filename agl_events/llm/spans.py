"""One proxied LLM call as the spans upstream's LLM proxy records, readable by both upstream adapters.

Upstream 0.3.0's proxy leaves LiteLLM's OpenTelemetry spans: `litellm_request` with a `raw_gen_ai_request`
child. We write the same two spans, under the call's one sequence id, with the attributes LiteLLM 1.108
gives them (compared attribute by attribute with upstream's proxy on the same calls in
tests/llm/test_upstream_parity.py), and add to `litellm_request` what upstream's OpenAI instrumentation
puts on its LLM spans:

- `raw_gen_ai_request`: `llm.<provider>.<key>` for the request as LiteLLM logs it and the backend's
  response, non-primitive values as Python literals. LiteLLM calls `openai/` and `azure/` chat backends
  through the OpenAI SDK and logs that call's arguments, so there the parameters OpenAI does not name
  (`return_token_ids`, ...) appear as `llm.openai.extra_body` = `{'return_token_ids': True}`;
- `litellm_request`: LiteLLM's `gen_ai.*` (the backend's model as `gen_ai.request.model`, the model list's
  name as `litellm.model_group`, `gen_ai.input.messages` / `gen_ai.output.messages` in OpenTelemetry's
  parts format), `http.route`, `litellm.call_id`; and for upstream's adapters:
- `LlmProxyTraceToTriplet` reads `raw_gen_ai_request`'s `llm.hosted_vllm.prompt_token_ids` / `.choices`
  (or `litellm_request`'s `prompt_token_ids` / `response_token_ids` for other providers) and dedups the
  two by response id, which both carry;
- `TracerTraceToTriplet(llm_call_match="litellm_request")` reads `prompt_token_ids`, `response_token_ids`
  (integer lists), `logprobs.content` (JSON), `gen_ai.response.id`, and `gen_ai.prompt.<i>.*`,
  `gen_ai.completion.<i>.*`, `gen_ai.request.*` flattened, as OpenLLMetry writes them.

Where ours differs from upstream's on purpose: `gen_ai.response.model` is the model the backend answered
with (the policy server names its weights version there; LiteLLM writes the model list's name), a
streamed call is recorded streamed with its token ids (upstream asks the backend unstreamed), a text
completion gets a raw span too and its text in `gen_ai.output.messages`, and a failed call keeps both
spans (status ERROR, the backend's status and message, an `exception` event, what it streamed before it
broke off). Pure: the call in, span dicts in the JSON shape of our `Span` out.
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any, Literal

CALL_SPAN = "litellm_request"
RAW_SPAN = "raw_gen_ai_request"
PROXY_SERVICE = "agl-events-llm-proxy"
CallKind = Literal["chat", "completion"]
_CALL_TYPES = {"chat": "acompletion", "completion": "atext_completion"}
_ROUTES = {"chat": "/chat/completions", "completion": "/completions"}
_TEXT_COMPLETION_SYSTEMS = {"openai": "text-completion-openai"}  # LiteLLM's name for OpenAI's completions
_REQUEST_ATTRIBUTES = ("max_tokens", "temperature", "top_p")
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


@dataclass(frozen=True)
class CallError:
    """Why a call failed: the HTTP status the agent got, a message, and an error type name."""

    status: int
    message: str
    type: str


@dataclass(frozen=True)
class TraceParent:
    """The caller's span, when its request carried a W3C `traceparent`: the call's spans nest under it."""

    trace_id: str
    span_id: str


def parse_traceparent(header: str | None) -> TraceParent | None:
    """A W3C `traceparent` header (`00-<trace id>-<span id>-<flags>`); None when absent or malformed."""
    match = _TRACEPARENT.match((header or "").strip().lower())
    if match is None or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None
    return TraceParent(trace_id=match.group(1), span_id=match.group(2))


@dataclass
class LlmCall:
    """Everything recorded about one call; `response` is the whole response (streams assembled)."""

    rollout_id: str
    attempt_id: str
    sequence_id: int
    kind: CallKind
    model_name: str
    provider: str
    request: dict[str, Any]
    stream: bool
    start_time: float
    end_time: float
    response: dict[str, Any] | None = None
    error: CallError | None = None
    parent: TraceParent | None = None
    extra_body: frozenset[str] = frozenset()  # the request keys LiteLLM's raw span shows under `extra_body`


def prompt_token_ids(call: LlmCall) -> list[int]:
    """vLLM puts a chat's prompt ids at the top and a completion's in its choice; a prompt given as ids is one."""
    response = call.response or {}
    ids = response.get("prompt_token_ids")
    if ids is None and call.kind == "completion":
        ids = _first_choice(response).get("prompt_token_ids")
        prompt = call.request.get("prompt")
        if ids is None and isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            ids = prompt
    return _ints(ids)


def response_token_ids(call: LlmCall) -> list[int]:
    choice = _first_choice(call.response or {})
    return _ints(choice.get("token_ids") or (choice.get("provider_specific_fields") or {}).get("token_ids"))


def logprobs_content(call: LlmCall) -> list[dict[str, Any]] | None:
    """The first choice's logprobs as a chat completion's `logprobs.content` (completions converted)."""
    logprobs = _first_choice(call.response or {}).get("logprobs")
    if not logprobs:
        return None
    if "content" in logprobs:
        return logprobs["content"]
    tops = logprobs.get("top_logprobs") or []
    return [{"token": token, "logprob": lp,
             "top_logprobs": [{"token": t, "logprob": v} for t, v in (tops[i] or {}).items()] if i < len(tops) else []}
            for i, (token, lp) in enumerate(zip(logprobs.get("tokens") or [], logprobs.get("token_logprobs") or [],
                                                strict=False))]


def call_spans(call: LlmCall) -> list[dict[str, Any]]:
    """The call's `litellm_request` span and its `raw_gen_ai_request` child, sharing the call's sequence id."""
    trace_id = call.parent.trace_id if call.parent else secrets.token_hex(16)
    request_id, raw_id = secrets.token_hex(8), secrets.token_hex(8)
    parent_id = call.parent.span_id if call.parent else None
    return [_span(call, CALL_SPAN, trace_id, request_id, parent_id, call_attributes(call)),
            _span(call, RAW_SPAN, trace_id, raw_id, request_id, raw_attributes(call))]


def call_attributes(call: LlmCall) -> dict[str, Any]:
    request, response = call.request, call.response or {}
    backend_model = str(request.get("model"))
    attributes: dict[str, Any] = {
        "http.route": _ROUTES[call.kind],
        "litellm.model_group": call.model_name,
        "litellm.provider.model": f"{call.provider}/{backend_model}",
        "litellm.call_id": str(uuid.uuid4()),
        "gen_ai.request.model": backend_model,
        "gen_ai.system": _system(call),
        "gen_ai.operation.name": _CALL_TYPES[call.kind],
        "llm.request.type": _CALL_TYPES[call.kind],
        "llm.is_streaming": str(call.stream),
        "gen_ai.input.messages": json.dumps(_parts(_messages(call))),
    }
    attributes.update({f"gen_ai.request.{k}": request[k] for k in _REQUEST_ATTRIBUTES
                       if isinstance(request.get(k), int | float)})
    attributes.update(_prompt_attributes(call))
    if call.error is not None:
        attributes.update({"error.type": call.error.type, "error.code": str(call.error.status),
                           "error.message": call.error.message, "error.llm_provider": call.provider,
                           "http.response.status_code": call.error.status})
    if not response:
        return attributes
    if response.get("id"):
        attributes["gen_ai.response.id"] = str(response["id"])
    if response.get("model"):
        attributes["gen_ai.response.model"] = str(response["model"])
    attributes.update(_usage_attributes(call))
    attributes.update(_completion_attributes(call))
    for key, ids in (("prompt_token_ids", prompt_token_ids(call)), ("response_token_ids", response_token_ids(call))):
        if ids:
            attributes[key] = ids
    content = logprobs_content(call)
    if content is not None:
        attributes["logprobs.content"] = json.dumps(content)
    return attributes


def raw_attributes(call: LlmCall) -> dict[str, Any]:
    """`llm.<provider>.<key>` for the request as LiteLLM logs it and the response received."""
    prefix = f"llm.{call.provider}"
    raw = {**logged_request(call), **(call.response or {})}
    attributes = {f"{prefix}.{key}": _primitive(value) for key, value in raw.items()}
    if call.error is not None:
        attributes[f"{prefix}.error"] = call.error.message
    return attributes


def logged_request(call: LlmCall) -> dict[str, Any]:
    """The request sent, its `extra_body` keys nested as LiteLLM's OpenAI SDK call has them."""
    named = {key: value for key, value in call.request.items() if key not in call.extra_body}
    nested = {key: value for key, value in call.request.items() if key in call.extra_body}
    return {**named, "extra_body": nested} if nested else named


def _system(call: LlmCall) -> str:
    return _TEXT_COMPLETION_SYSTEMS.get(call.provider, call.provider) if call.kind == "completion" else call.provider


def _messages(call: LlmCall) -> list[dict[str, Any]]:
    """The call's input as chat messages (a text completion's prompts as user messages, as LiteLLM has them)."""
    if call.kind == "chat":
        messages = call.request.get("messages") or []
        return [m for m in messages if isinstance(m, dict)]
    prompt = call.request.get("prompt")
    prompts = prompt if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt) else [prompt]
    return [{"role": "user", "content": p} for p in prompts]


def _parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages in OpenTelemetry GenAI's format (`{"role", "parts": [{"type": "text", "content"}]}`), as
    LiteLLM writes `gen_ai.input.messages` and `gen_ai.output.messages`."""
    converted = []
    for message in messages:
        content = message.get("content", "")
        parts: list[Any] = []
        if isinstance(content, str):
            parts.append({"type": "text", "content": content})
        elif isinstance(content, list):
            parts.extend(p if isinstance(p, dict) else {"type": "text", "content": str(p)} for p in content)
        entry: dict[str, Any] = {"role": message.get("role", "user"), "parts": parts}
        entry.update({key: message[key] for key in ("id", "tool_calls", "tool_call_id", "finish_reason")
                      if key in message})
        converted.append(entry)
    return converted


def _usage_attributes(call: LlmCall) -> dict[str, int]:
    """The backend's usage; counted from the token ids when it sent none (a stream without include_usage)."""
    usage = (call.response or {}).get("usage") or {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) and not isinstance(completion, int):
        prompt, completion = len(prompt_token_ids(call)), len(response_token_ids(call))
        if not prompt and not completion:
            return {}
        usage = {"total_tokens": prompt + completion}
    counted = {"input_tokens": prompt, "output_tokens": completion, "total_tokens": usage.get("total_tokens")}
    return {f"gen_ai.usage.{name}": value for name, value in counted.items() if isinstance(value, int)}


def _prompt_attributes(call: LlmCall) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for i, message in enumerate(_messages(call)):
        attributes[f"gen_ai.prompt.{i}.role"] = str(message.get("role", "user"))
        attributes[f"gen_ai.prompt.{i}.content"] = _content(message.get("content"))
        if message.get("tool_calls"):
            attributes[f"gen_ai.prompt.{i}.tool_calls"] = json.dumps(message["tool_calls"])
        if message.get("tool_call_id"):
            attributes[f"gen_ai.prompt.{i}.tool_call_id"] = str(message["tool_call_id"])
    return attributes


def _completion_attributes(call: LlmCall) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    choices = (call.response or {}).get("choices") or []
    for i, choice in enumerate(choices):
        message = _choice_message(choice)
        attributes[f"gen_ai.completion.{i}.role"] = str(message.get("role") or "assistant")
        attributes[f"gen_ai.completion.{i}.content"] = _content(message.get("content"))
        if choice.get("finish_reason"):
            attributes[f"gen_ai.completion.{i}.finish_reason"] = str(choice["finish_reason"])
        if message.get("tool_calls"):
            attributes[f"gen_ai.completion.{i}.tool_calls"] = json.dumps(message["tool_calls"])
    if choices:
        attributes["gen_ai.output.messages"] = json.dumps(_parts(
            [{**_choice_message(c), **({"finish_reason": c["finish_reason"]} if c.get("finish_reason") else {})}
             for c in choices]))
    reasons = [str(c["finish_reason"]) for c in choices if c.get("finish_reason")]
    if reasons:
        attributes["gen_ai.response.finish_reasons"] = json.dumps(reasons)
    return attributes


def _choice_message(choice: dict[str, Any]) -> dict[str, Any]:
    """A choice's message; a text completion's text as the assistant's."""
    message = choice.get("message")
    return message if isinstance(message, dict) else {"role": "assistant", "content": choice.get("text")}


def _span(call: LlmCall, name: str, trace_id: str, span_id: str, parent_id: str | None,
          attributes: dict[str, Any]) -> dict[str, Any]:
    failed = call.error is not None
    context = {"trace_id": trace_id, "span_id": span_id, "is_remote": False, "trace_state": {}}
    parent = {"trace_id": trace_id, "span_id": parent_id, "is_remote": name == CALL_SPAN, "trace_state": {}}
    events = [{"name": "exception", "timestamp": call.end_time,
               "attributes": {"exception.type": call.error.type, "exception.message": call.error.message}}
              ] if call.error is not None else []
    return {
        "rollout_id": call.rollout_id,
        "attempt_id": call.attempt_id,
        "sequence_id": call.sequence_id,
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_id": parent_id,
        "name": name,
        "status": {"status_code": "ERROR" if failed else "OK",
                   "description": call.error.message if call.error is not None else None},
        "attributes": attributes,
        "events": events,
        "links": [],
        "start_time": call.start_time,
        "end_time": call.end_time,
        "context": context,
        "parent": parent if parent_id is not None else None,
        "resource": {"attributes": {"service.name": PROXY_SERVICE}, "schema_url": ""},
    }


def _first_choice(response: dict[str, Any]) -> dict[str, Any]:
    choices = response.get("choices") or []
    return choices[0] if choices else {}


def _ints(value: Any) -> list[int]:
    return list(value) if isinstance(value, list) and all(isinstance(v, int) for v in value) else []


def _content(content: Any) -> str:
    return content if isinstance(content, str) else ("" if content is None else json.dumps(content))


def _primitive(value: Any) -> str | bool | int | float:
    """LiteLLM's rule for attribute values: primitives as they are, None as "", anything else as str()."""
    if value is None:
        return ""
    return value if isinstance(value, str | bool | int | float) else str(value)

"""LlmProxyTraceToTriplet: spans an LLM proxy recorded (LiteLLM's) -> one triplet per call, ordered by sequence id.

Proxy spans come from another process, often another machine, so their clocks and parent links say
nothing about the agent's order: only the sequence id the proxy was given per request does. LiteLLM's
OpenTelemetry logger writes the backend's raw response fields as `llm.<provider>.<field>`, Python
`str()` of lists included, hence the literal parsing. A port of upstream's adapter of the same name.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agl_events.adapter.base import TraceToTripletBase
from agl_events.emitter.reward import get_reward_value
from agl_events.types import Span, Triplet

RAW_REQUEST = "raw_gen_ai_request"  # LiteLLM's span around the backend call, with llm.hosted_vllm.* fields
LITELLM_REQUEST = "litellm_request"  # LiteLLM's span of the client's request, token ids only if a hook adds them
VLLM = "llm.hosted_vllm"


def _literal(value: Any) -> Any:
    """A Python literal written as text (`"[1, 2]"`) parsed; anything else (or unparsable text) unchanged."""
    if isinstance(value, str):
        try:
            return ast.literal_eval(value)
        except Exception:
            return value
    return value


def _int_list(value: Any) -> list[int] | None:
    return value if isinstance(value, list) and all(isinstance(x, int) for x in value) else None


def raw_request_token_ids(attributes: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """Prompt and first-choice response token ids of a raw vLLM response ([] where missing)."""
    prompt = _int_list(_literal(attributes.get(f"{VLLM}.prompt_token_ids"))) or []
    response: list[int] = []
    per_choice = _literal(attributes.get(f"{VLLM}.response_token_ids"))  # older vLLM: [[...], ...]
    if isinstance(per_choice, list) and per_choice and isinstance(per_choice[0], list):
        response = _int_list(per_choice[0]) or []
    if not response:  # vLLM's return_token_ids: choices[0].token_ids
        choices = _literal(attributes.get(f"{VLLM}.choices"))
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            response = _int_list(choices[0].get("token_ids")) or []
    return prompt, response


def request_token_ids(attributes: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """Token ids a hook copied onto a `litellm_request` span as `prompt_token_ids` / `response_token_ids`."""
    prompt = _int_list(_literal(attributes.get("prompt_token_ids") or [])) or []
    response = _int_list(_literal(attributes.get("response_token_ids") or [])) or []
    return prompt, response


def response_id(attributes: Mapping[str, Any]) -> str | None:
    """The OpenAI-style response id if present, else the backend's raw id; None unless a non-empty string."""
    rid = attributes.get("gen_ai.response.id") or attributes.get(f"{VLLM}.id")
    return rid if isinstance(rid, str) and rid else None


@dataclass(frozen=True)
class _ProxyCall:
    span_id: str
    sequence_id: int
    prompt_ids: list[int]
    response_ids: list[int]
    response_id: str | None


class LlmProxyTraceToTriplet(TraceToTripletBase):
    """Calls are spans with both prompt and response token ids (first per response id); each reward, in
    sequence order, goes to the latest call without one whose sequence id is smaller.

    Upstream marks it experimental (it may merge into TracerTraceToTriplet); it takes no arguments.
    """

    def adapt(self, source: Sequence[Span], /) -> list[Triplet]:
        spans = sorted(source, key=lambda s: (s.sequence_id, s.start_time))
        calls: list[_ProxyCall] = []
        seen: set[str] = set()
        for span in spans:
            if span.name == RAW_REQUEST:
                prompt, response = raw_request_token_ids(span.attributes)
            elif span.name == LITELLM_REQUEST:
                prompt, response = request_token_ids(span.attributes)
            else:
                continue
            if not (prompt and response):
                continue
            rid = response_id(span.attributes)
            if rid is not None:
                if rid in seen:
                    continue  # the same response recorded twice
                seen.add(rid)
            calls.append(_ProxyCall(span_id=span.span_id, sequence_id=span.sequence_id, prompt_ids=prompt,
                                    response_ids=response, response_id=rid))
        rewards = sorted(((span.sequence_id, value) for span in spans
                          if (value := get_reward_value(span)) is not None), key=lambda r: r[0])
        assigned: dict[str, float] = {}
        for reward_seq, value in rewards:
            for call in reversed(calls):
                if call.span_id not in assigned and call.sequence_id < reward_seq:
                    assigned[call.span_id] = value
                    break
        return [Triplet(prompt={"token_ids": call.prompt_ids}, response={"token_ids": call.response_ids},
                        reward=assigned.get(call.span_id),
                        metadata={"response_id": call.response_id})  # named as the other adapters name it
                for call in calls]

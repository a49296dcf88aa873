"""Where an LLM call's data sits in span attributes, for each instrumentation upstream's adapters know.

The same prompt token ids arrive as `prompt_token_ids` (AgentOps + vLLM), or nested under
`agentlightning.operation.output.*` (Weave), and the agent a span belongs to is named by a different
key per framework. Upstream's `adapter/triplet.py` tries these keys in a fixed order; reading them in
the same order here is what makes our triplets equal to upstream's on the same spans.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from agl_events.emitter.attributes import filter_and_unflatten_attributes
from agl_events.types import Span

log = logging.getLogger(__name__)

PROMPT_TOKEN_IDS = ("prompt_token_ids", "agentlightning.operation.output.prompt_token_ids")
RESPONSE_TOKEN_IDS = (
    "response_token_ids",
    "agentlightning.operation.output.response_token_ids.0",  # Weave
    "agentlightning.operation.output.choices.0.token_ids",  # Weave with newer vLLM
    "agentlightning.operation.output.choices.0.provider_specific_fields.token_ids",  # newer OpenAI SDK
)
RESPONSE_ID = ("gen_ai.response.id", "agentlightning.operation.output.id")
REQUEST = ("gen_ai.request", "agentlightning.operation.input")
RESPONSE = ("gen_ai.response", "agentlightning.operation.output")
PROMPT = ("gen_ai.prompt", "agentlightning.operation.input.messages")
COMPLETION = ("gen_ai.completion", "agentlightning.operation.output.choices")
#: JSON text of the first choice's `logprobs.content` (a list of {token, logprob, bytes, top_logprobs}).
LOGPROBS = "logprobs.content"


def first_string(attributes: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The first of `keys` present with a string value (present non-strings are skipped with a warning)."""
    for key in keys:
        if key in attributes:
            if isinstance(attributes[key], str):
                return attributes[key]
            log.warning("Attribute %s is found but is not a string: %s", key, attributes[key])
    return None


def first_token_ids(attributes: Mapping[str, Any], keys: Sequence[str]) -> list[int] | None:
    """The first of `keys` present holding a list of integers."""
    for key in keys:
        if key in attributes:
            value = attributes[key]
            if isinstance(value, list | tuple) and all(isinstance(x, int) for x in value):
                return list(value)
            log.warning("Attribute %s is found but is not a list of integers: %s", key, value)
    return None


def first_unflattened(attributes: Mapping[str, Any], prefixes: Sequence[str]) -> dict[str, Any] | list[Any] | None:
    """The first prefix with any dotted keys under it, nested back into dicts and lists."""
    for prefix in prefixes:
        nested = filter_and_unflatten_attributes(dict(attributes), prefix)
        if nested:
            return nested
    return None


def agent_name(span: Span) -> Any:
    """The agent a span stands for, by each framework's convention (upstream's order); None if not an agent."""
    attributes = span.attributes
    if attributes.get("agent.name") is not None:  # OpenAI Agents SDK
        return attributes["agent.name"]
    if attributes.get("agentops.span.kind") == "agent" and attributes.get("operation.name") is not None:
        return attributes["operation.name"]  # AgentOps @agent
    for key in ("recipient_agent_type", "langchain.chain.type", "executor.id"):  # AutoGen, LangGraph, agent-framework
        if attributes.get(key) is not None:
            return attributes[key]
    if attributes.get("type") == "agent" and attributes.get("agentlightning.operation.input.name") is not None:
        return attributes["agentlightning.operation.input.name"]  # Weave
    if span.name.startswith("langchain.Chain.") and attributes.get("lc_name") is not None:
        return attributes["lc_name"]  # Weave + LangChain
    return None

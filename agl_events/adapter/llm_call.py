"""One LLM-call span as a triplet without its reward: token ids, raw messages, request/response metadata.

This is the shape trainers read (upstream's `TraceTree.span_to_triplet`): `prompt` = {token_ids, raw_content,
image_urls}, `response` = {token_ids, raw_content[, logprobs]}, `metadata` = {request, response, response_id,
agent_name}. The reward is matched separately, over the whole trace (see tree.py).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from agl_events.adapter import attributes as attrs
from agl_events.types import Span, Triplet

log = logging.getLogger(__name__)


def _message_entries(prompt: Any) -> list[Any]:
    """Messages of a raw prompt: a list as is; a dict keyed "0", "1", ... by index (other keys dropped)."""
    if isinstance(prompt, list):
        return prompt
    if isinstance(prompt, dict):
        indices = sorted((key for key in prompt if isinstance(key, str) and key.isdigit()), key=int)
        return [prompt[key] for key in indices] if indices else [prompt]
    return []


def prompt_image_urls(prompt: Any) -> list[str]:
    """Image URLs of the prompt's content parts (content may be JSON text), in order of appearance."""
    urls: list[str] = []
    for message in _message_entries(prompt):
        if not isinstance(message, dict) or "content" not in message:
            continue
        content = message["content"]
        if isinstance(content, str):
            try:
                content = json.loads(content)
            except json.JSONDecodeError:
                log.debug("Failed to parse message content as JSON: %s", content)
                continue
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                image_url = part.get("image_url")
                if isinstance(image_url, dict) and "url" in image_url:
                    urls.append(image_url["url"])
    return urls


def llm_call_triplet(span: Span, agent_name: str) -> Triplet:
    """The triplet of an LLM-call span (reward None); token ids default to [] when the span has none."""
    a = span.attributes
    request = attrs.first_unflattened(a, attrs.REQUEST)
    response = attrs.first_unflattened(a, attrs.RESPONSE)
    # Weave nests messages, choices and token ids under the same prefixes: they are reported elsewhere.
    if isinstance(request, dict):
        request.pop("messages", None)
    if isinstance(response, dict):
        for key in ("choices", "prompt_token_ids", "response_token_ids"):
            response.pop(key, None)
    prompt_content = attrs.first_unflattened(a, attrs.PROMPT)
    prompt = {"token_ids": attrs.first_token_ids(a, attrs.PROMPT_TOKEN_IDS) or [],
              "raw_content": prompt_content, "image_urls": prompt_image_urls(prompt_content)}
    completion: dict[str, Any] = {"token_ids": attrs.first_token_ids(a, attrs.RESPONSE_TOKEN_IDS) or [],
                                  "raw_content": attrs.first_unflattened(a, attrs.COMPLETION)}
    logprobs = a.get(attrs.LOGPROBS)
    if isinstance(logprobs, str):
        completion["logprobs"] = json.loads(logprobs)
    return Triplet(prompt=prompt, response=completion, reward=None,
                   metadata={"request": request, "response": response,
                             "response_id": attrs.first_string(a, attrs.RESPONSE_ID), "agent_name": agent_name})

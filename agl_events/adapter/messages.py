"""TraceToMessages: spans -> OpenAI chat fine-tuning records ({messages, tools}), one per span with gen_ai data.

For supervised fine-tuning and prompt optimisation, what matters is the conversation, not token ids: each
span's flattened `gen_ai.prompt.*` / `gen_ai.completion.*` / `gen_ai.request.*` attributes, plus tool calls
recorded as `tool.*` child spans, become the JSONL structure OpenAI's fine-tuning takes. A port of
upstream's adapter of the same name, producing the same plain dicts without importing the openai package
(upstream validates each message against openai's TypedDicts; the same rules are spelled out here).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypedDict

from agl_events.adapter.base import TraceAdapter
from agl_events.types import Span

#: Roles whose messages carry just role and content; a tool message also needs its tool_call_id.
_PLAIN_ROLES = ("system", "user", "assistant", "developer")


class OpenAIMessages(TypedDict):
    """One fine-tuning record: the chat messages and the function tools offered (None if none)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None


def group_genai_dict(data: Mapping[str, Any], prefix: str) -> dict[str, Any] | list[Any]:
    """Dotted keys under `prefix` nested: a level whose keys include an integer becomes a list (by index,
    other keys at that level dropped), otherwise a dict. Unlike `unflatten_attributes`, indices need not
    be consecutive: `gen_ai.prompt.0.*` and `gen_ai.prompt.2.*` give a list of two."""
    relevant = {k[len(prefix) + 1:]: v for k, v in data.items() if k.startswith(prefix + ".")}
    if any(key.split(".")[0].isdigit() for key in relevant):
        by_index: dict[int, dict[str, Any]] = defaultdict(dict)
        for key, value in relevant.items():
            head, _, rest = key.partition(".")
            if head.isdigit():
                by_index[int(head)][f"{prefix}.{rest}"] = value
        return [group_genai_dict(by_index[i], prefix) for i in sorted(by_index)]
    result: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = defaultdict(dict)
    for key, value in relevant.items():
        if "." in key:
            nested[key.split(".", 1)[0]][f"{prefix}.{key}"] = value
        else:
            result[key] = value
    for head, sub in nested.items():
        result[head] = group_genai_dict(sub, f"{prefix}.{head}")
    return result


def _chat_message(role: str, content: Any, tool_call_id: Any) -> dict[str, Any]:
    """A prompt message as openai's ChatCompletionMessageParam validation leaves it (extra keys dropped)."""
    if not isinstance(content, str):
        raise ValueError(f"Message content must be a string, got {type(content)} for role {role!r}")
    if role in _PLAIN_ROLES:
        return {"role": role, "content": content}
    if role == "tool":
        if not isinstance(tool_call_id, str):
            raise ValueError(f"A tool message needs a string tool_call_id, got {tool_call_id!r}")
        return {"role": role, "content": content, "tool_call_id": tool_call_id}
    raise ValueError(f"Unsupported message role: {role!r}")


def _function_call(call_id: Any, call_type: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": call_type, "function": {"name": name, "arguments": arguments}}


def to_openai_messages(prompt: list[dict[str, Any]], completion: list[dict[str, Any]], request: dict[str, Any],
                       tools: list[dict[str, Any]]) -> OpenAIMessages:
    """Prompt messages, then each assistant completion (with the span's tool calls), then function tools."""
    messages: list[dict[str, Any]] = []
    for message in prompt:
        role = message["role"]
        if role == "assistant" and "tool_calls" in message:
            calls = [_function_call(c["id"], "function", c["name"], c["arguments"]) for c in message["tool_calls"]]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        else:
            messages.append(_chat_message(role, message.get("content", ""), message.get("tool_call_id")))
    for choice in completion:
        if choice.get("role") != "assistant":
            continue
        reply: dict[str, Any] = {"role": "assistant", "content": choice.get("content")}
        if tools:
            reply["tool_calls"] = [_function_call(t["call"]["id"], t["call"]["type"], t["name"], t["parameters"])
                                   for t in tools]
        messages.append(reply)
    if "functions" not in request:
        return OpenAIMessages(messages=messages, tools=None)
    functions = [{"type": "function", "function": {
        "name": fn["name"], "description": fn.get("description", ""),
        "parameters": json.loads(fn["parameters"]) if isinstance(fn["parameters"], str) else fn["parameters"]}}
        for fn in request["functions"]]
    return OpenAIMessages(messages=messages, tools=functions)


class TraceToMessages(TraceAdapter[list[OpenAIMessages]]):
    """One record per span with any gen_ai prompt/completion/request/response attribute, in span order.

    Tool calls are the `tool.*` attributes of the span's direct children (upstream assumes the same).
    """

    def get_tool_calls(self, completion: Span, all_spans: Sequence[Span], /) -> Iterator[dict[str, Any]]:
        """The `tool.*` attributes of each direct child of `completion` that has any."""
        for child in all_spans:
            if child.parent_id != completion.span_id:
                continue
            call = group_genai_dict(child.attributes, "tool")
            if not isinstance(call, dict):
                raise ValueError(f"Extracted tool call from trace is not a dict: {call}")
            if call:
                yield call

    def adapt(self, source: Sequence[Span], /) -> list[OpenAIMessages]:
        records: list[OpenAIMessages] = []
        for span in source:
            parts = {name: group_genai_dict(span.attributes, f"gen_ai.{name}")
                     for name in ("prompt", "completion", "request", "response")}
            for name, kind in (("prompt", list), ("completion", list), ("request", dict), ("response", dict)):
                if parts[name] and not isinstance(parts[name], kind):
                    raise ValueError(f"Extracted {name} from trace is not a {kind.__name__}: {parts[name]}")
            if any(parts.values()):
                records.append(to_openai_messages(parts["prompt"] or [], parts["completion"] or [],  # type: ignore[arg-type]
                                                  parts["request"] or {}, list(self.get_tool_calls(span, source))))  # type: ignore[arg-type]
        return records

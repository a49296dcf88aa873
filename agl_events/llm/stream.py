"""A streamed completion, folded chunk by chunk into the response the same call gives unstreamed.

The proxy forwards every chunk to the agent the moment it arrives (first-token latency stays the
backend's) and folds a copy here, so the call's span carries the full text, token ids and logprobs
whether or not the agent streamed: vLLM sends `prompt_token_ids` in the first chunk and each chunk's
own `token_ids` and logprobs, which upstream 0.3.0 drops when streaming. Pure: chunks in, dict out.
"""

from __future__ import annotations

from typing import Any

_TEXT_LOGPROB_LISTS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


class StreamAssembler:
    """Fold chat (`chat=True`) or text completion chunks; `response()` is the whole response so far."""

    def __init__(self, *, chat: bool) -> None:
        self.chat = chat
        self._top: dict[str, Any] = {}
        self._choices: dict[int, dict[str, Any]] = {}
        self.chunks = 0

    def add(self, chunk: dict[str, Any]) -> None:
        self.chunks += 1
        for key, value in chunk.items():
            if key == "choices" or value is None:
                continue
            if key == "prompt_token_ids":
                self._top.setdefault(key, value)  # the first chunk's; later ones never repeat it
            elif key != "object":
                self._top[key] = value
        for delta in chunk.get("choices") or []:
            index = int(delta.get("index", 0))
            if index not in self._choices:
                self._choices[index] = self._new_choice(index)
            self._fold(self._choices[index], delta)

    def _new_choice(self, index: int) -> dict[str, Any]:
        if self.chat:
            return {"index": index, "message": {"role": "assistant", "content": None}, "logprobs": None,
                    "finish_reason": None}
        return {"index": index, "text": "", "logprobs": None, "finish_reason": None}

    def _fold(self, choice: dict[str, Any], delta: dict[str, Any]) -> None:
        if delta.get("finish_reason") is not None:
            choice["finish_reason"] = delta["finish_reason"]
        if delta.get("token_ids"):
            choice.setdefault("token_ids", []).extend(delta["token_ids"])
        if delta.get("prompt_token_ids") is not None:  # text completions: per choice, first chunk
            choice.setdefault("prompt_token_ids", delta["prompt_token_ids"])
        logprobs = delta.get("logprobs")
        if self.chat:
            _fold_message(choice["message"], delta.get("delta") or {})
            if logprobs and logprobs.get("content"):
                choice["logprobs"] = choice["logprobs"] or {"content": []}
                choice["logprobs"]["content"].extend(logprobs["content"])
        else:
            choice["text"] += delta.get("text") or ""
            if logprobs:
                choice["logprobs"] = choice["logprobs"] or {key: [] for key in _TEXT_LOGPROB_LISTS}
                for key in _TEXT_LOGPROB_LISTS:
                    choice["logprobs"][key].extend(logprobs.get(key) or [])

    def response(self) -> dict[str, Any]:
        obj = "chat.completion" if self.chat else "text_completion"
        return {**self._top, "object": obj, "choices": [self._choices[i] for i in sorted(self._choices)]}


def _fold_message(message: dict[str, Any], delta: dict[str, Any]) -> None:
    """Text fields concatenate; tool calls merge by their index (name once, arguments piece by piece)."""
    for key, value in delta.items():
        if value is None:
            continue
        if key == "role":
            message["role"] = value
        elif key == "tool_calls":
            calls: list[dict[str, Any]] = message.setdefault("tool_calls", [])
            for part in value:
                _fold_tool_call(calls, part)
        elif isinstance(value, str):
            message[key] = (message.get(key) or "") + value
        else:
            message[key] = value


def _fold_tool_call(calls: list[dict[str, Any]], part: dict[str, Any]) -> None:
    index = int(part.get("index", len(calls)))
    while len(calls) <= index:
        calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
    call = calls[index]
    for key in ("id", "type"):
        if part.get(key):
            call[key] = part[key]
    function = part.get("function") or {}
    call["function"]["name"] += function.get("name") or ""
    call["function"]["arguments"] += function.get("arguments") or ""


def sse_data(event: list[str]) -> str | None:
    """The data of one server-sent event (its lines, without the blank line that ended it)."""
    data = [line[5:].removeprefix(" ") for line in event if line.startswith("data:")]
    return "\n".join(data) if data else None

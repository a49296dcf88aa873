"""One backend answer in vLLM's OpenAI-compatible shapes, whole or as SSE chunks, with `return_token_ids`.

Shared by every backend we serve ourselves (the fake backend of the proxy's tests, the torch policy server),
so both answer exactly as vLLM does and the proxy records the same fields from either:

- chat: top-level `prompt_token_ids`, `choices[0].token_ids`, `choices[0].logprobs.content[{token, logprob,
  bytes, top_logprobs}]`; streamed, `prompt_token_ids` in the first chunk only and `token_ids` per chunk;
- completions: `choices[0].prompt_token_ids`, `choices[0].token_ids` and the legacy `logprobs` (tokens,
  token_logprobs, top_logprobs, text_offset), streamed likewise.

A backend gives the tokens it generated (text pieces, ids, logprobs, and per token its alternatives, best
first); what the request asked for (`return_token_ids`, `logprobs`, `top_logprobs`, `stream_options`)
decides which fields appear.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class StreamFailure:
    """A stream that breaks off with vLLM's error event after `after_tokens` tokens."""

    status: int
    message: str
    after_tokens: int


@dataclass(frozen=True)
class Generated:
    """What a backend generated for one request: a piece of text, an id and a logprob per token; `top`
    holds each token's alternatives (token text, logprob), best first, the sampled one among them."""

    pieces: list[str]
    ids: list[int]
    logprobs: list[float]
    top: list[list[tuple[str, float]]]
    finish: str


class VllmAnswer:
    """One reply to `body`, as vLLM shapes it. `model` is the answer's `model` field (the request's, unless
    the backend names the version it used there)."""

    def __init__(self, body: dict[str, Any], prompt_ids: list[int], generated: Generated, *, chat: bool,
                 model: str | None = None, failure: StreamFailure | None = None, token_delay: float = 0.0) -> None:
        self.body, self.generated, self.chat, self.failure = body, generated, chat, failure
        self.model = model if model is not None else str(body.get("model"))
        self.token_delay = token_delay
        self.prompt_ids = prompt_ids
        self.token_ids = bool(body.get("return_token_ids"))
        logprobs = body.get("logprobs")
        self.logprobs = bool(logprobs) if chat else logprobs is not None
        self.top = int(body.get("top_logprobs") or 0) if chat else int(logprobs or 0)
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _usage(self) -> dict[str, int]:
        completion = len(self.generated.ids)
        return {"prompt_tokens": len(self.prompt_ids), "completion_tokens": completion,
                "total_tokens": len(self.prompt_ids) + completion}

    def _chat_logprobs(self, span: slice) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        g = self.generated
        return {"content": [{"token": p, "logprob": lp, "bytes": list(p.encode()),
                             "top_logprobs": [{"token": t, "logprob": tlp, "bytes": list(t.encode())}
                                              for t, tlp in top[: self.top]]}
                            for p, lp, top in zip(g.pieces[span], g.logprobs[span], g.top[span], strict=True)]}

    def _text_logprobs(self, span: slice, offset: int) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        g = self.generated
        offsets, at = [], offset
        for p in g.pieces[span]:
            offsets.append(at)
            at += len(p)
        return {"tokens": g.pieces[span], "token_logprobs": g.logprobs[span],
                "top_logprobs": [dict(top[: self.top]) for top in g.top[span]], "text_offset": offsets}

    def whole(self) -> dict[str, Any]:
        g, everything = self.generated, slice(None)
        text = "".join(g.pieces)
        choice: dict[str, Any]
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "logprobs": self._chat_logprobs(everything), "finish_reason": g.finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": self._text_logprobs(everything, 0),
                      "finish_reason": g.finish}
            if self.token_ids:
                choice["prompt_token_ids"] = self.prompt_ids
        if self.token_ids:
            choice["token_ids"] = g.ids
        response: dict[str, Any] = {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                                    "created": self.created, "model": self.model, "choices": [choice],
                                    "usage": self._usage()}
        if self.chat and self.token_ids:
            response["prompt_token_ids"] = self.prompt_ids
        return response

    def _chunk(self, choices: list[dict[str, Any]], **top: Any) -> bytes:
        chunk = {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                 "created": self.created, "model": self.model, **top, "choices": choices}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    async def chunks(self) -> AsyncIterator[bytes]:
        g, offset = self.generated, 0
        if self.chat:
            first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            yield self._chunk([first], **({"prompt_token_ids": self.prompt_ids} if self.token_ids else {}))
        for i, (piece, tid) in enumerate(zip(g.pieces, g.ids, strict=True)):
            if self.failure is not None and i == self.failure.after_tokens:
                error = {"message": self.failure.message, "type": "InternalServerError", "param": None,
                         "code": self.failure.status}
                yield b"data: " + orjson.dumps({"error": error}) + b"\n\n"
                break
            last, one = i == len(g.pieces) - 1, slice(i, i + 1)
            choice: dict[str, Any]
            if self.chat:
                choice = {"index": 0, "delta": {"content": piece}, "logprobs": self._chat_logprobs(one),
                          "finish_reason": g.finish if last else None}
            else:
                choice = {"index": 0, "text": piece, "logprobs": self._text_logprobs(one, offset),
                          "finish_reason": g.finish if last else None}
                if self.token_ids and i == 0:
                    choice["prompt_token_ids"] = self.prompt_ids
            if self.token_ids:
                choice["token_ids"] = [tid]
            offset += len(piece)
            await asyncio.sleep(self.token_delay)
            yield self._chunk([choice])
        if (self.body.get("stream_options") or {}).get("include_usage"):
            yield self._chunk([], usage=self._usage())
        yield b"data: [DONE]\n\n"

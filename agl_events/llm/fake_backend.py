"""A small OpenAI-compatible backend that answers as vLLM does when asked for `return_token_ids`.

The proxy's tests and its overhead benchmark need a real HTTP backend on loopback with vLLM's token-id
and logprob fields, and no GPU, model or network. Replies are deterministic (the same request gives the
same tokens, ids and logprobs), so a test can compute what the recorded spans must hold:

- chat: top-level `prompt_token_ids`, `choices[i].token_ids`, `choices[i].logprobs.content[{token,
  logprob, bytes, top_logprobs}]`; streamed, `prompt_token_ids` in the first chunk only and `token_ids`
  per chunk (the delta's tokens), as vLLM streams them;
- completions: `choices[i].prompt_token_ids`, `choices[i].token_ids` and the legacy `logprobs` (tokens,
  token_logprobs, top_logprobs, text_offset), streamed likewise;
- `failure`: every request answers with that status and an OpenAI-style error body (or a streamed call
  breaks off with an error event), until cleared.

Tokens are whitespace-led words (`tokenize`); the reply is `reply` if set, else "Echo: <the last message's
text or the prompt>", cut at `max_tokens` (finish_reason "length"). `token_delay` seconds pass per
generated token (before each streamed chunk, all of them before a plain answer), for latency benchmarks.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel

from agl_events.llm.loopback import LoopbackServer
from agl_events.llm.vllm_format import Generated, StreamFailure, VllmAnswer

_PIECE = re.compile(r"\s*\S+|\s+")
VOCAB = 50_000


class BackendFailure(BaseModel):
    """What a failing backend answers: this HTTP status and message, at once or, for a streamed call,
    as vLLM's error event after `after_tokens` tokens were streamed."""

    status: int = 503
    message: str = "the fake backend is failing on purpose"
    after_tokens: int | None = None


def tokenize(text: str) -> list[str]:
    """Whitespace-led pieces: "Echo: hi there" -> ["Echo:", " hi", " there"]."""
    return _PIECE.findall(text)


def token_id(piece: str) -> int:
    return zlib.crc32(piece.encode()) % VOCAB


def logprob(piece: str) -> float:
    """A deterministic log probability in (-1, 0]."""
    return -(zlib.crc32(piece.encode(), 7) % 1000) / 1000


def render_chat(messages: list[dict[str, Any]]) -> str:
    """The prompt text a chat template would make of `messages` (what prompt_token_ids encode)."""
    parts = [f"<|{m.get('role', 'user')}|> {_text(m.get('content'))}\n" for m in messages]
    return "".join(parts) + "<|assistant|>"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multi-part content: its text parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class FakeBackend(LoopbackServer):
    """The backend as a FastAPI app; `start()` serves it on loopback in a thread (`url` ends in /v1).

    `requests` holds every request body received, so tests can check what the proxy asked for.
    """

    def __init__(self, model: str = "fake-model", *, reply: str | None = None, token_delay: float = 0.0,
                 host: str = "127.0.0.1") -> None:
        self.model = model
        self.reply = reply
        self.token_delay = token_delay
        self.failure: BackendFailure | None = None
        self.requests: list[dict[str, Any]] = []
        super().__init__(self._build_app(), name="fake LLM backend", host=host)

    # -- what a request gets -----------------------------------------------------------------------
    def reply_pieces(self, last_text: str, max_tokens: int | None) -> tuple[list[str], str]:
        """The reply's tokens and finish reason, for a request whose last message (or prompt) is `last_text`."""
        pieces = tokenize(self.reply if self.reply is not None else f"Echo: {last_text}")
        if max_tokens is not None and len(pieces) > max_tokens:
            return pieces[:max_tokens], "length"
        return pieces, "stop"

    def _build_app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            return await self._answer(await request.json(), chat=True)

        @app.post("/v1/completions")
        async def completions(request: Request) -> Response:
            return await self._answer(await request.json(), chat=False)

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]}

        return app

    async def _answer(self, body: dict[str, Any], *, chat: bool) -> Response:
        self.requests.append(body)
        if self.failure is not None and not (body.get("stream") and self.failure.after_tokens is not None):
            return _error(self.failure.status, self.failure.message, "ServiceUnavailableError")
        if body.get("model") != self.model:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        if chat:
            messages = body.get("messages") or []
            prompt, last = render_chat(messages), _text(messages[-1].get("content")) if messages else ""
        else:
            prompt = last = body.get("prompt")
            if not isinstance(prompt, str):
                return _error(400, "the fake backend takes one prompt string", "BadRequestError")
        pieces, finish = self.reply_pieces(last, body.get("max_tokens"))
        generated = Generated(pieces, [token_id(p) for p in pieces], [logprob(p) for p in pieces],
                              [_alternatives(p, int(body.get("top_logprobs") or body.get("logprobs") or 0))
                               for p in pieces], finish)
        failure = self.failure
        stream_failure = (StreamFailure(failure.status, failure.message, failure.after_tokens)
                          if failure is not None and failure.after_tokens is not None else None)
        answer = VllmAnswer(body, [token_id(p) for p in tokenize(prompt)], generated, chat=chat,
                            failure=stream_failure, token_delay=self.token_delay)
        if body.get("stream"):
            return StreamingResponse(answer.chunks(), media_type="text/event-stream")
        await asyncio.sleep(self.token_delay * len(pieces))
        return Response(orjson.dumps(answer.whole()), media_type="application/json")


def _alternatives(piece: str, top: int) -> list[tuple[str, float]]:
    """`top` made-up alternatives, the token itself first."""
    return [(piece, logprob(piece))] + [(f"{piece}~{k}", logprob(piece) - k) for k in range(1, top)]


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": status}},
                        status_code=status)

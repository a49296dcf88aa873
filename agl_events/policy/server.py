"""`PolicyServer`: the torch policy behind an OpenAI-compatible API, answering as vLLM does.

The LLM proxy asks backends for `return_token_ids` and logprobs and records them in its spans; answering
in vLLM's exact shapes (`agl_events.llm.vllm_format`) makes the toy policy one more such backend, so the
samples a trainer reads carry the token ids and the logprobs they were sampled with.

Versions: `load(uri, version)` switches to a weights file (the trainer calls it after writing one, before
publishing the resource that names it); requests already sampling finish on the version they started with.
Each answer's `model` field is `<model>:v<version>`, the version that sampled it; the proxy records it as
the span attribute `gen_ai.response.model`.
"""

from __future__ import annotations

from typing import Any, Self

import orjson
import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from transformers import PreTrainedTokenizerFast

from agl_events.llm.loopback import LoopbackServer
from agl_events.llm.vllm_format import Generated, VllmAnswer
from agl_events.policy.model import Policy
from agl_events.policy.weights import load_weights

DEFAULT_MAX_TOKENS = 8


class PolicyServer(LoopbackServer):
    """Serves model `model` (the name requests must use) on loopback in a thread; `url` ends in /v1."""

    def __init__(self, tokenizer: PreTrainedTokenizerFast, *, model: str = "policy", host: str = "127.0.0.1",
                 seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self._current: tuple[int, Policy] | None = None
        self._generator = torch.Generator().manual_seed(seed)
        super().__init__(self._build_app(), name="policy server", host=host)

    @property
    def version(self) -> int | None:
        return None if self._current is None else self._current[0]

    def load(self, uri: str, version: int) -> None:
        """Serve the weights at `uri` as `version` from the next request on."""
        self._current = (version, load_weights(uri))

    # -- serving ---------------------------------------------------------------------------------
    def start(self) -> Self:
        torch.set_num_threads(1)  # a tiny model: one thread is several times faster than two on two cores
        return super().start()

    # -- answering -------------------------------------------------------------------------------
    def generate(self, prompt_ids: list[int], body: dict[str, Any], *, chat: bool) -> tuple[int, Generated]:
        """Sample an answer with the request's `temperature`, `max_tokens`, `seed` and logprob count."""
        if self._current is None:
            raise LookupError("the policy server has no weights loaded yet")
        version, policy = self._current
        seed = body.get("seed")
        generator = torch.Generator().manual_seed(int(seed)) if seed is not None else self._generator
        top = int(body.get("top_logprobs") or 0) if chat else int(body.get("logprobs") or 0)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_MAX_TOKENS)
        eos = self.tokenizer.eos_token_id
        ids, logprobs, tops = policy.sample(prompt_ids, max_tokens, temperature=float(body.get("temperature", 1.0)),
                                            eos_id=eos, generator=generator, top=max(top, 1))
        words = self.tokenizer.convert_ids_to_tokens(ids)
        special = set(self.tokenizer.all_special_ids)  # no text, as vLLM's skip_special_tokens
        pieces = ["" if i in special else (" " if n else "") + w
                  for n, (i, w) in enumerate(zip(ids, words, strict=True))]
        alternatives = [[(self.tokenizer.convert_ids_to_tokens(t), lp) for t, lp in row] for row in tops]
        finish = "stop" if ids and ids[-1] == eos else "length"
        return version, Generated(pieces, ids, logprobs, alternatives, finish)

    def prompt_ids(self, body: dict[str, Any], *, chat: bool) -> list[int]:
        if chat:
            rendered = self.tokenizer.apply_chat_template(body.get("messages") or [], add_generation_prompt=True,
                                                          tokenize=True, return_dict=True)
            return list(rendered["input_ids"])
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("the policy server takes one prompt string")
        return [self.tokenizer.bos_token_id, *self.tokenizer(prompt, add_special_tokens=False).input_ids]

    def _build_app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            return self._answer(await request.json(), chat=True)

        @app.post("/v1/completions")
        async def completions(request: Request) -> Response:
            return self._answer(await request.json(), chat=False)

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "agl-events",
                                                "version": self.version}]}

        return app

    def _answer(self, body: dict[str, Any], *, chat: bool) -> Response:
        if body.get("model") != self.model:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        try:
            prompt_ids = self.prompt_ids(body, chat=chat)
            version, generated = self.generate(prompt_ids, body, chat=chat)
        except ValueError as exc:
            return _error(400, str(exc), "BadRequestError")
        except LookupError as exc:
            return _error(503, str(exc), "ServiceUnavailableError")
        answer = VllmAnswer(body, prompt_ids, generated, chat=chat, model=f"{self.model}:v{version}")
        if body.get("stream"):
            return StreamingResponse(answer.chunks(), media_type="text/event-stream")
        return Response(orjson.dumps(answer.whole()), media_type="application/json")


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": status}},
                        status_code=status)

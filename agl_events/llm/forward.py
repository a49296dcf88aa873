"""One proxied call: ask the backend for token ids and logprobs, relay its answer, record the call's spans.

A plain call is forwarded with the agent's body (model renamed, `return_token_ids` and `logprobs` added)
and answered once the spans are durable: with the backend's bytes, a chat answer with its choices' vLLM
fields also under `provider_specific_fields`, where LiteLLM (upstream's proxy) puts them (`answer.py`).
A streamed call is relayed event by event as the backend sends it, so the agent sees the first token
when the backend produces it; a copy of each chunk is folded (`StreamAssembler`) and only the final
`data: [DONE]` waits for the spans. Asking
the backend unstreamed and replaying the answer as SSE (upstream 0.3.0's way) would have kept the token
ids too, but every first token would then arrive with the last.

Failures reach the agent as OpenAI-style errors (`{"error": {"message", "type", "code"}}`) with the
backend's status (502 when it cannot be reached, 504 on timeout), and are recorded as an ERROR call.
A call whose spans cannot be written fails too (503, or an error event ending the stream): a training
trace silently missing a call would be worse than a retried call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
from fastapi.responses import JSONResponse, Response, StreamingResponse

from agl_events.llm.answer import with_provider_specific_fields
from agl_events.llm.metrics import ProxyMetrics
from agl_events.llm.recorder import SpanRecorder
from agl_events.llm.routing import Deployment, ModelRouter
from agl_events.llm.spans import CallError, CallKind, LlmCall, TraceParent, call_spans
from agl_events.llm.stream import StreamAssembler, sse_data

log = logging.getLogger(__name__)

ENDPOINTS: dict[CallKind, str] = {"chat": "chat/completions", "completion": "completions"}
DONE = b"data: [DONE]\n\n"


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    """The OpenAI error shape, which the OpenAI SDK turns into its matching exception with this message."""
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": status}},
                        status_code=status)


def backend_body(body: dict[str, Any], kind: CallKind, deployment: Deployment) -> dict[str, Any]:
    """The agent's request as the backend gets it: its model name, and token ids and logprobs asked for."""
    sent = {**body, "model": deployment.backend_model}
    if deployment.asks_token_ids:
        sent["return_token_ids"] = True
    if deployment.asks_logprobs:
        if kind == "chat":
            sent["logprobs"] = True
        elif sent.get("logprobs") is None:
            sent["logprobs"] = 1
    return sent


def backend_error(status: int, payload: bytes, deployment: Deployment) -> CallError:
    """What a backend's error answer says, with where it came from."""
    message, kind = payload.decode(errors="replace")[:2000], "BackendError"
    try:
        parsed = orjson.loads(payload)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        detail = parsed.get("error", parsed)
        if isinstance(detail, dict):
            message = str(detail.get("message") or detail.get("detail") or message)
            kind = str(detail.get("type") or kind)
        elif isinstance(detail, str):
            message = detail
    return CallError(status, f"backend for model {deployment.model_name!r} ({deployment.api_base}) answered "
                             f"{status}: {message}", kind)


def transport_error(exc: httpx.HTTPError, deployment: Deployment) -> CallError:
    if isinstance(exc, httpx.TimeoutException):
        return CallError(504, f"backend for model {deployment.model_name!r} ({deployment.api_base}) timed out: "
                              f"{exc!r}", "BackendTimeout")
    return CallError(502, f"backend for model {deployment.model_name!r} ({deployment.api_base}) cannot be "
                          f"reached: {exc!r}", "BackendUnreachable")


class Forwarder:
    """Forwards calls of any rollout; one per proxy, sharing its HTTP pool, router and recorder."""

    def __init__(self, router: ModelRouter, recorder: SpanRecorder, http: httpx.AsyncClient,
                 metrics: ProxyMetrics | None = None) -> None:
        self.router = router
        self.recorder = recorder
        self.http = http
        self.metrics = metrics
        self._background: set[asyncio.Task[Any]] = set()

    async def call(self, rollout_id: str, attempt_id: str, kind: CallKind, body: dict[str, Any],
                   parent: TraceParent | None) -> Response:
        """Raises UnknownAttemptError / UnknownModelError before anything is forwarded."""
        checked = await self.recorder.check_attempt(rollout_id, attempt_id)
        deployment = await self.router.route(body.get("model"))
        # While the backend works (a new attempt's was reserved by its check).
        sequence_id = asyncio.ensure_future(self.recorder.reserve(rollout_id, attempt_id, checked))
        sent = backend_body(body, kind, deployment)
        call = LlmCall(rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=0, kind=kind,
                       model_name=deployment.model_name, provider=deployment.provider, request=sent,
                       stream=bool(body.get("stream")), start_time=time.time(), end_time=0.0, parent=parent,
                       extra_body=deployment.extra_body(kind, sent))
        request = self.http.build_request("POST", deployment.url(ENDPOINTS[kind]), json=sent,
                                          headers=deployment.headers(), timeout=deployment.timeout or
                                          self.http.timeout)
        try:
            response = await self.http.send(request, stream=call.stream)
        except httpx.HTTPError as exc:
            return await self._failed(call, sequence_id, transport_error(exc, deployment))
        if call.stream and response.status_code < 400:
            return StreamingResponse(self._relay(call, sequence_id, response, deployment),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        return await self._answer(call, sequence_id, response, deployment)

    async def _answer(self, call: LlmCall, sequence_id: asyncio.Future[int], response: httpx.Response,
                      deployment: Deployment) -> Response:
        """A whole answer (or an error, streamed or not): the backend's bytes once the spans are durable."""
        try:
            payload = await response.aread()
        except httpx.HTTPError as exc:
            return await self._failed(call, sequence_id, transport_error(exc, deployment))
        finally:
            await response.aclose()
        if response.status_code >= 400:
            return await self._failed(call, sequence_id, backend_error(response.status_code, payload, deployment))
        try:
            call.response = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return await self._failed(call, sequence_id, CallError(
                502, f"backend for model {deployment.model_name!r} answered with invalid JSON: {payload[:200]!r}",
                "BackendError"))
        unrecorded = await self._record(call, sequence_id)
        if unrecorded is not None:
            return error_response(unrecorded.status, unrecorded.message, unrecorded.type)
        if call.kind == "chat" and isinstance(call.response, dict):
            payload = orjson.dumps(with_provider_specific_fields(call.response))
        return Response(payload, status_code=response.status_code, media_type="application/json")

    def _record_soon(self, call: LlmCall, sequence_id: asyncio.Future[int]) -> asyncio.Future[CallError | None]:
        """Start writing the call's spans as a task of its own, which an agent hanging up cannot cut short."""
        call.end_time = time.time()
        task = asyncio.ensure_future(self._write(call, sequence_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _record(self, call: LlmCall, sequence_id: asyncio.Future[int]) -> CallError | None:
        """Write the call's spans durably; the error to answer with if that failed."""
        return await asyncio.shield(self._record_soon(call, sequence_id))

    async def _write(self, call: LlmCall, sequence_id: asyncio.Future[int]) -> CallError | None:
        unrecorded: CallError | None = None
        try:
            call.sequence_id = await sequence_id
            await self.recorder.record(call_spans(call))
        except Exception as exc:
            log.exception("spans of a call of rollout %s attempt %s were not recorded", call.rollout_id,
                          call.attempt_id)
            unrecorded = CallError(503, f"the call was answered, but its spans could not be recorded: {exc}",
                                   "SpanRecordError")
        if self.metrics is not None:
            self.metrics.observe(call, unrecorded)
        return unrecorded

    async def _failed(self, call: LlmCall, sequence_id: asyncio.Future[int], error: CallError) -> Response:
        call.error = error
        await self._record(call, sequence_id)
        return error_response(error.status, error.message, error.type)

    async def _relay(self, call: LlmCall, sequence_id: asyncio.Future[int], response: httpx.Response,
                     deployment: Deployment) -> AsyncIterator[bytes]:
        """The backend's events as they come; `[DONE]` (or an error event) once the spans are durable.

        The backend's own mid-stream error event is held back until then too: an agent's client raises
        on it and hangs up, and its call must be in the log by the time it does (read your own writes).
        """
        assembler = StreamAssembler(chat=call.kind == "chat")
        held_error: bytes | None = None  # the backend's error event, relayed once the spans are durable
        try:
            async for event in _events(response):
                data = sse_data(event)
                if data == "[DONE]":
                    continue
                error = _fold(assembler, data) if data else None
                if error is not None:
                    call.error, held_error = error, ("\n".join(event) + "\n\n").encode()
                    break
                yield ("\n".join(event) + "\n\n").encode()
        except httpx.HTTPError as exc:
            call.error = transport_error(exc, deployment)
        except BaseException:  # the agent hung up mid-stream (cancelled, or the stream closed): record what it got
            call.response = assembler.response() if assembler.chunks else None
            call.error = call.error or CallError(499, "the client closed the stream before it ended",
                                                 "ClientDisconnected")
            self._record_soon(call, sequence_id)
            raise
        finally:
            await response.aclose()
        call.response = assembler.response() if assembler.chunks else None
        unrecorded = await self._record(call, sequence_id)
        failure = unrecorded or call.error
        if unrecorded is None and held_error is not None:
            yield held_error
        elif failure is not None:
            yield b"data: " + orjson.dumps({"error": {"message": failure.message, "type": failure.type,
                                                      "code": failure.status}}) + b"\n\n"
        yield DONE


def _fold(assembler: StreamAssembler, data: str) -> CallError | None:
    """Fold one event's chunk; the error it reports, if it is vLLM's mid-stream error event."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(chunk, dict):
        return None
    detail = chunk.get("error")
    if isinstance(detail, dict):
        code = detail.get("code")
        return CallError(code if isinstance(code, int) else 500, str(detail.get("message") or detail),
                         str(detail.get("type") or "BackendError"))
    assembler.add(chunk)
    return None


async def _events(response: httpx.Response) -> AsyncIterator[list[str]]:
    """Server-sent events as their lines; an event ends at a blank line (or with the stream)."""
    event: list[str] = []
    async for line in response.aiter_lines():
        if line:
            event.append(line)
        elif event:
            yield event
            event = []
    if event:
        yield event

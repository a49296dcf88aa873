"""Tests of the samples layer on plain data: events as the span topic holds them, through the real codec.

Helpers build SpanAdded and RolloutFinished events the way the log returns them (encoded and decoded
with the contract's schemas), so the pure code sees exactly the records the processor will.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agl_events.adapter.base import TraceAdapter
from agl_events.events.codec import AvroCodec
from agl_events.events.convert import attempt_record, rollout_record, span_record
from agl_events.log.records import LoggedEvent
from agl_events.types import Span, Triplet
from tests.store import make_span

TOPIC = "agl.t.spans"
CODEC = AvroCodec()


def logged(kind: str, key: str, offset: int, **fields: Any) -> LoggedEvent:
    record = {"event_id": f"e{offset}", "time": 1.0, "producer_id": "test", **fields}
    decoded = CODEC.decode(CODEC.encode(kind, record))
    return LoggedEvent(decoded.name, key, decoded.record, TOPIC, 0, offset)


def span_added(rid: str, aid: str, seq: int, offset: int, name: str = "llm", **attributes: Any) -> LoggedEvent:
    span = make_span(rid, aid, seq, name=name).model_dump(mode="json")
    span["attributes"] = {"k": "v", **attributes}
    return logged("SpanAdded", rid, offset, span=span_record(span))


def rollout(rid: str, *, input: Any = None, metadata: dict[str, Any] | None = None, status: str = "succeeded",
            resources_id: str | None = "rs-1", mode: str | None = "train") -> dict[str, Any]:
    return {"rollout_id": rid, "input": {"q": rid} if input is None else input, "start_time": 1.0,
            "end_time": 2.0, "mode": mode, "resources_id": resources_id, "status": status,
            "config": {"timeout_seconds": None, "unresponsive_seconds": None, "max_attempts": 1,
                       "retry_condition": []},
            "metadata": metadata}


def attempt(rid: str, aid: str, seq: int = 1) -> dict[str, Any]:
    return {"rollout_id": rid, "attempt_id": aid, "sequence_id": seq, "start_time": 1.0, "end_time": 2.0,
            "status": "succeeded", "worker_id": "w", "last_heartbeat_time": 2.0, "metadata": None}


def finished(rid: str, aid: str | None, offset: int, generation: int | None = 1, **rollout_fields: Any
             ) -> LoggedEvent:
    return logged("RolloutFinished", rid, offset, rollout=rollout_record(rollout(rid, **rollout_fields)),
                  attempt=None if aid is None else attempt_record(attempt(rid, aid)),
                  resources_generation=generation)


class TokenTriplets(TraceAdapter[list[Triplet]]):
    """A small adapter: one triplet per span with token ids; it cannot handle a span named `unadaptable`.

    Also what the samples worker runs in tests/processors (`--adapter tests.samples:TokenTriplets`).
    """

    def adapt(self, source: Sequence[Span], /) -> list[Triplet]:
        if any(s.name == "unadaptable" for s in source):
            raise ValueError("cannot adapt span 'unadaptable'")
        return [Triplet(prompt={"token_ids": list(s.attributes["prompt_token_ids"]), "raw_content": s.name},
                        response={"token_ids": list(s.attributes.get("response_token_ids", [])),
                                  "logprobs": list(s.attributes.get("logprobs", []))},
                        metadata={"sequence_id": s.sequence_id})
                for s in source if "prompt_token_ids" in s.attributes]


token_triplets = TokenTriplets()

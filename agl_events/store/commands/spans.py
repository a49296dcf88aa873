"""Span decisions: per-rollout sequence ids, duplicate rejection, and spans as attempt heartbeats."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from agl_events.events.typed import AttemptHeartbeat, AttemptStatusChanged, SpanAdded, SpanSequenceReserved
from agl_events.reducers import keys
from agl_events.store.commands.attempts import set_rollout_status
from agl_events.store.committer import PartialFailure
from agl_events.store.context import DecisionContext

log = logging.getLogger("agl_events.store")


def allocate_sequence_ids(ctx: DecisionContext, pairs: Sequence[tuple[str, str]]) -> list[int]:
    """Next ids per rollout (shared by its attempts), gap-free; one reservation event per rollout."""
    issued: list[int] = []
    last: dict[str, tuple[str, int]] = {}
    for rid, aid in pairs:
        current = last[rid][1] if rid in last else (ctx.get(keys.span_counter(rid)) or 0)
        issued.append(current + 1)
        last[rid] = (aid, current + 1)
    for rid, (aid, seq) in last.items():
        ctx.emit(SpanSequenceReserved(rollout_id=rid, attempt_id=aid, sequence_id=seq))
    return issued


def add_spans(ctx: DecisionContext, spans: Sequence[dict[str, Any]]) -> list[int] | PartialFailure:
    """Insert spans grouped by (rollout, attempt); returns the indexes of those inserted (not duplicates).

    As upstream, each group first bumps the rollout's sequence counter, then is validated; an unknown
    rollout or attempt fails the call but keeps that bump and the groups inserted before it.
    """
    groups: dict[tuple[str, str], list[int]] = {}
    for index, span in enumerate(spans):
        groups.setdefault((span["rollout_id"], span["attempt_id"]), []).append(index)
    inserted: list[int] = []
    for (rid, aid), indexes in groups.items():
        top = max(spans[i]["sequence_id"] for i in indexes)
        if (ctx.get(keys.span_counter(rid)) or 0) < top:
            ctx.emit(SpanSequenceReserved(rollout_id=rid, attempt_id=aid, sequence_id=top))
        if ctx.rollout(rid) is None:
            return PartialFailure(ValueError(f"Rollout {rid} not found"))
        if ctx.attempt(rid, aid) is None:
            return PartialFailure(ValueError(f"Attempt {aid} not found for rollout {rid}"))
        fresh: list[int] = []
        for i in indexes:
            span = spans[i]
            if ctx.get(keys.span_seen(rid, aid, span["span_id"])) is not None:
                log.error("Duplicated span added for rollout=%s, attempt=%s, span=%s. Skipping.",
                          rid, aid, span["span_id"])
                continue
            ctx.emit(SpanAdded.of(span))
            fresh.append(i)
        if fresh:
            heartbeat(ctx, rid, aid)
        inserted.extend(fresh)
    return sorted(inserted)


def heartbeat(ctx: DecisionContext, rid: str, aid: str) -> None:
    """A span is a heartbeat: it revives a preparing or unresponsive attempt, and its rollout if latest."""
    ctx.emit(AttemptHeartbeat(rollout_id=rid, attempt_id=aid, heartbeat_time=ctx.now))
    attempt = ctx.attempt(rid, aid)
    assert attempt is not None
    if attempt["status"] in ("preparing", "unresponsive"):
        ctx.emit(AttemptStatusChanged(rollout_id=rid, attempt_id=aid, status="running",
                                      previous_status=attempt["status"]))
    latest = ctx.latest_attempt(rid)
    rollout = ctx.rollout(rid)
    if latest is not None and rollout is not None and latest["attempt_id"] == aid \
            and rollout["status"] in ("preparing", "requeuing"):
        set_rollout_status(ctx, rid, "running", "span")

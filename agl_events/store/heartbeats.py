"""Heartbeats inferred from spans: a span someone else appended (a runner's tracer, the LLM proxy) proves its
attempt alive, so the watchdog must not declare it unresponsive.

The follower hands every folded batch to `observe`; the heartbeats the foreign spans imply are decided off the
follower's path (it keeps folding meanwhile: a finishing attempt waits for the fold), spans arriving meanwhile
joining the next decision. A store taking over partitions times its running attempts' silence from then
(`watch_from_now`): nobody decided their heartbeats while no store owned them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from agl_events.events.kinds import Kind
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.store.commands import spans as span_cmds
from agl_events.store.context import DecisionContext
from agl_events.store.watchdog import Decide

log = logging.getLogger(__name__)
#: How stale a running attempt's heartbeat may get while its runner streams spans (far below any sensible
#: unresponsive_seconds; one heartbeat event per rollout for short rollouts).
FOREIGN_HEARTBEAT_SECONDS = 0.5


class Heartbeats:
    """Decides, through `decide`, the heartbeats of spans not written by `producer_id` (this store)."""

    def __init__(self, producer_id: str, decide: Decide) -> None:
        self._producer_id = producer_id
        self._decide = decide
        #: (rollout, attempt) pairs with foreign spans whose heartbeat is still to be decided, in arrival order.
        self._beats: dict[tuple[str, str], None] = {}
        self._beating: asyncio.Task[None] | None = None

    def observe(self, events: list[LoggedEvent]) -> None:
        self._beats.update(dict.fromkeys((e.record["span"]["rollout_id"], e.record["span"]["attempt_id"])
                                         for e in events if e.kind == Kind.SPAN_ADDED
                                         and e.record["producer_id"] != self._producer_id))
        if self._beats and (self._beating is None or self._beating.done()):
            self._beating = asyncio.get_running_loop().create_task(self._beat(), name="agl-heartbeats")

    async def _beat(self) -> None:
        while self._beats:
            pairs, self._beats = list(self._beats), {}
            try:
                await self.record(pairs)
            except Exception:  # the next span of that attempt is another heartbeat; keep following
                log.exception("recording heartbeats failed")

    async def record(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Decide what these attempts' foreign spans imply, only where it changes what the watchdog looks at:
        they revive a preparing or unresponsive attempt, and refresh a running one whose heartbeat is older
        than FOREIGN_HEARTBEAT_SECONDS. A runner streams spans in many small batches; an event per batch would
        cost an append each."""
        def beat(ctx: DecisionContext) -> None:
            for rid, aid in dict.fromkeys(pairs):
                if not ctx.placement.owns(rid):  # its owner decides (it folds the same spans)
                    continue
                attempt = ctx.attempt(rid, aid)
                if attempt is None or attempt["status"] not in ("preparing", "unresponsive", "running"):
                    continue
                if attempt["status"] == "running" and \
                        ctx.now - (attempt["last_heartbeat_time"] or 0.0) < FOREIGN_HEARTBEAT_SECONDS:
                    continue
                span_cmds.heartbeat(ctx, rid, aid)

        await self._decide(beat)

    async def stop(self) -> None:
        if self._beating is not None:
            self._beating.cancel()
            await asyncio.gather(self._beating, return_exceptions=True)


def watch_from_now(ctx: DecisionContext, partitions: set[int]) -> int:
    """A heartbeat for every running attempt of `partitions`: while no store owned them, nobody decided the
    heartbeats their runners' spans imply, so the watchdog would declare live attempts unresponsive (and a
    retry would then run beside the live one). Their silence is timed from the take-over instead."""
    beaten = 0
    for key, _ in list(ctx.scan(keys.ACTIVE)):
        rid = key[len(keys.ACTIVE):]
        if ctx.placement.partition(rid) not in partitions:
            continue
        attempt = ctx.latest_attempt(rid)
        if attempt is not None and attempt["status"] == "running":
            span_cmds.heartbeat(ctx, rid, attempt["attempt_id"])
            beaten += 1
    return beaten

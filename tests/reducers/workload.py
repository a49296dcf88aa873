"""A random but valid workload, driven through the real command layer on the in-memory store.

What it logged is realistic input for fold properties: every event a command decides, in the order
and shape the log holds them, including the awkward ones that hand-written cases tend to miss:
retries and requeues, duplicate spans, explicit sequence ids below the counter, and a sequence
reservation for a rollout that does not exist.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.store.memory import InMemoryLightningStore
from agl_events.store.service import EventSourcedStore
from agl_events.types import AttemptedRollout, EnqueueRolloutRequest, PromptCandidateStep, RolloutConfig, Span
from tests.reducers import View
from tests.store import make_span, prompt

WORKERS = ("w-1", "w-2", "w-3", None)
ATTEMPT_STATUSES = ("running", "succeeded", "failed", "timeout", "unresponsive")
ROLLOUT_STATUSES = ("queuing", "requeuing", "preparing", "running", "succeeded", "failed", "cancelled")


@dataclass
class Run:
    """The log of one workload (topic by topic, each in offset order) and the view the store ended with."""

    events: list[LoggedEvent]
    view: View


@dataclass
class _Workload:
    rng: random.Random
    store: EventSourcedStore
    attempts: dict[str, list[str]] = field(default_factory=dict)  # rollout id -> its attempt ids, in order
    resources: list[str] = field(default_factory=list)
    sent: list[Span] = field(default_factory=list)
    step: int = 0

    def config(self) -> RolloutConfig:
        return RolloutConfig(max_attempts=self.rng.randint(1, 3),
                             retry_condition=self.rng.sample(["failed", "timeout", "unresponsive"], 2))

    def claimed(self, claims: list[AttemptedRollout]) -> None:
        for claim in claims:
            self.attempts.setdefault(claim.rollout_id, []).append(claim.attempt.attempt_id)

    def rollout(self) -> str | None:
        return self.rng.choice(list(self.attempts)) if self.attempts else None


async def _enqueue(w: _Workload) -> None:
    if w.rng.random() < 0.5:
        rollout = await w.store.enqueue_rollout(input={"step": w.step}, config=w.config(),
                                                metadata={"seed": w.rng.random()})
        w.attempts.setdefault(rollout.rollout_id, [])
        return
    requests = [EnqueueRolloutRequest(input={"step": w.step, "i": i}, config=w.config())
                for i in range(w.rng.randint(1, 3))]
    for rollout in await w.store.enqueue_many_rollouts(requests):
        w.attempts.setdefault(rollout.rollout_id, [])


async def _start(w: _Workload) -> None:
    w.claimed([await w.store.start_rollout(input={"step": w.step}, config=w.config(),
                                           worker_id=w.rng.choice(WORKERS))])


async def _dequeue(w: _Workload) -> None:
    w.claimed(list(await w.store.dequeue_many_rollouts(limit=w.rng.randint(1, 3), worker_id=w.rng.choice(WORKERS))))


async def _start_attempt(w: _Workload) -> None:
    rid = w.rollout()
    if rid is not None:
        w.claimed([await w.store.start_attempt(rid, worker_id=w.rng.choice(WORKERS))])


async def _spans(w: _Workload) -> None:
    """A batch of spans for one attempt: fresh ids or explicit ones, sometimes resending earlier spans."""
    rid = w.rollout()
    if rid is None or not w.attempts[rid]:
        return
    aid = w.attempts[rid][-1] if w.rng.random() < 0.7 else w.rng.choice(w.attempts[rid])
    count = w.rng.randint(1, 4)
    if w.rng.random() < 0.5:
        seqs = list(await w.store.get_many_span_sequence_ids([(rid, aid)] * count))
    else:
        seqs = [w.rng.randint(1, 40) for _ in range(count)]
    batch = [make_span(rid, aid, seq, name=f"s{w.step}") for seq in seqs]
    if w.sent and w.rng.random() < 0.3:
        batch.append(w.rng.choice(w.sent))  # a duplicate (or a span of another rollout, also legal)
    w.sent.extend(batch)
    await w.store.add_many_spans(batch)


async def _span_of_unknown_rollout(w: _Workload) -> None:
    """Fails, but its sequence reservation stands in the log (as upstream keeps it)."""
    try:
        await w.store.add_span(make_span(f"ro-missing{w.step}", "at-missing", w.rng.randint(1, 5)))
    except ValueError:
        return
    raise AssertionError("a span of an unknown rollout was accepted")


async def _update_attempt(w: _Workload) -> None:
    rid = w.rollout()
    if rid is None or not w.attempts[rid]:
        return
    aid = "latest" if w.rng.random() < 0.6 else w.rng.choice(w.attempts[rid])
    change: dict[str, Any] = w.rng.choice([
        {"status": w.rng.choice(ATTEMPT_STATUSES)}, {"metadata": {"step": w.step}},
        {"worker_id": w.rng.choice(WORKERS)}, {"last_heartbeat_time": float(w.step)},
    ])
    await w.store.update_attempt(rid, aid, **change)


async def _update_rollout(w: _Workload) -> None:
    rid = w.rollout()
    if rid is None:
        return
    change = w.rng.choice([{"status": w.rng.choice(ROLLOUT_STATUSES)}, {"metadata": {"step": w.step}}])
    await w.store.update_rollout(rid, **change)


async def _resources(w: _Workload) -> None:
    """Publish new resources, or update (or create by id) a known one."""
    named = {"main": prompt(f"v{w.step} {{name}}")}
    if w.resources and w.rng.random() < 0.6:
        snapshot = await w.store.update_resources(w.rng.choice(w.resources), named)
    elif w.rng.random() < 0.3:
        snapshot = await w.store.update_resources(f"rs-named{w.step}", named)
    else:
        snapshot = await w.store.add_resources(named)
    if snapshot.resources_id not in w.resources:
        w.resources.append(snapshot.resources_id)


async def _prompt_candidate(w: _Workload) -> None:
    """An APO step about a known resources version: proposed (or failed), or scored on a batch or in full."""
    if not w.resources:
        return
    candidate, stage = w.rng.choice(w.resources), w.rng.choice(["proposed", "scored", "scored", "failed"])
    scored = stage == "scored"
    await w.store.record_prompt_candidate(PromptCandidateStep(
        run_id=f"run-{w.step % 2}", candidate_id=candidate, stage=stage, round=w.rng.randint(0, 3),
        template=None if scored else f"v{w.step}", scope=w.rng.choice(["batch", "full"]) if scored else None,
        score=w.rng.random() if scored else None, reason="no answer" if stage == "failed" else None))


async def _worker_heartbeat(w: _Workload) -> None:
    wid = w.rng.choice(WORKERS[:-1])
    if w.rng.random() < 0.5:
        await w.store.update_worker(wid, heartbeat_stats={"step": w.step})
    else:
        await w.store.update_worker(wid)


_OPS: tuple[Callable[[_Workload], Awaitable[None]], ...] = (
    _enqueue, _enqueue, _start, _dequeue, _dequeue, _start_attempt, _spans, _spans, _spans,
    _span_of_unknown_rollout, _update_attempt, _update_attempt, _update_rollout, _resources, _prompt_candidate,
    _worker_heartbeat,
)


class Workload(_Workload):
    """Random operations on any store (the replay tests drive the Kafka store with it)."""

    async def run(self, steps: int) -> None:
        for _ in range(steps):
            await self.rng.choice(_OPS)(self)
            self.step += 1


def workload(store: EventSourcedStore, seed: int) -> Workload:
    """The same seed makes the same choices (ids and times still differ)."""
    return Workload(random.Random(seed), store)


async def random_run(seed: int, steps: int = 150) -> Run:
    """Run `steps` random operations on the in-memory store and return what it logged."""
    store = InMemoryLightningStore(scan_debounce_seconds=3600)  # no watchdog: its decisions depend on time
    try:
        await workload(store, seed).run(steps)
        events = [e for entries in store.log.topics.values() for e in entries]
        # The state, without the positions the store's follower records and the counts per log partition its
        # view keeps (a plain fold has neither).
        state = {k: v for k, v in store.view.scan("") if not k.startswith((keys.POSITIONS, keys.PARTITION_COUNTS))}
        return Run(events, state)
    finally:
        await store.close()

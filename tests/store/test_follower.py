"""The follower on both backends: events other producers append are folded and mean the same thing, and a
fold that fails stops the store loudly instead of leaving its callers waiting forever."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.events.convert import span_record
from agl_events.events.kinds import Kind
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.memory import InMemoryLog
from agl_events.log.reader import EventReader
from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent, event
from agl_events.log.writer import EventWriter
from agl_events.reducers import REDUCERS
from agl_events.store import follower
from agl_events.store.errors import StoreUnhealthyError
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.memory import InMemoryLightningStore
from agl_events.topics import Topic, topic_name
from agl_events.types import RolloutConfig
from agl_events.views.kv import DictKV
from agl_events.views.store_view import StoreView
from tests.eventually import eventually, eventually_async
from tests.store import make_span, store_over

AppendForeign = Callable[[Sequence[NewEvent]], None]


@pytest.fixture
def append_foreign(store: Any, request: pytest.FixtureRequest) -> Iterator[AppendForeign]:
    """Append events to the store's log as another producer would (a runner's tracer, another process)."""
    if isinstance(store, InMemoryLightningStore):
        yield lambda events: store.log.append_now(events)
        return
    settings = request.getfixturevalue("settings")
    writer = EventWriter(settings.bootstrap_servers, settings.experiment, AvroCodec(), producer_id="runner-x")
    yield lambda events: writer.append_sync(events)
    writer.close()


async def test_a_foreign_span_revives_an_unresponsive_attempt(store, clock, append_foreign) -> None:
    ar = await store.start_rollout(input=1, config=RolloutConfig(unresponsive_seconds=5))
    clock.advance(6)
    assert (await store.get_latest_attempt(ar.rollout_id)).status == "unresponsive"
    span = make_span(ar.rollout_id, ar.attempt.attempt_id, 1).model_dump(mode="json")
    append_foreign([event(Kind.SPAN_ADDED, ar.rollout_id, clock(), "runner-x", span=span_record(span))])

    async def revived() -> bool:
        attempt = await store.get_latest_attempt(ar.rollout_id)
        return attempt.status == "running" and attempt.last_heartbeat_time == pytest.approx(clock(), abs=1e-3)

    await eventually_async(revived, "the attempt revived by the foreign span", within=10)
    assert (await store.query_spans(ar.rollout_id)).total == 1


async def test_finishing_waits_until_foreign_spans_are_folded(store, clock, append_foreign) -> None:
    ar = await store.start_rollout(input=1)
    spans = [make_span(ar.rollout_id, ar.attempt.attempt_id, i).model_dump(mode="json") for i in (1, 2, 3)]
    append_foreign([event(Kind.SPAN_ADDED, ar.rollout_id, clock(), "runner-x", span=span_record(s))
                    for s in spans])
    await store.update_attempt(ar.rollout_id, ar.attempt.attempt_id, status="succeeded")
    # No waiting here: the finish itself waited for the fold.
    assert [s.sequence_id for s in (await store.query_spans(ar.rollout_id)).items] == [1, 2, 3]


async def test_a_failing_fold_stops_the_store_and_its_waiters(store, clock, append_foreign, monkeypatch,
                                                             caplog) -> None:
    # Offsets past the log's end are refused after END_CHECK_SECONDS; here the failure must come first.
    monkeypatch.setattr(follower, "END_CHECK_SECONDS", 60.0)
    ar = await store.start_rollout(input=1)
    waiting = asyncio.ensure_future(store.wait_for_rollouts(rollout_ids=[ar.rollout_id], timeout=None))
    # A finish whose spans are not folded yet (they never will be) waits for the fold:
    finishing = asyncio.ensure_future(store.finish_attempt(ar.rollout_id, ar.attempt.attempt_id, "succeeded",
                                                           {0: 10**9}))
    await asyncio.sleep(0.1)  # let both start waiting
    failures: list[BaseException] = []
    store.add_failure_listener(failures.append)

    def broken(pending: Any, record: dict[str, Any]) -> None:
        raise RuntimeError("reducer bug")

    monkeypatch.setitem(REDUCERS, Kind.WORKER_HEARTBEAT, broken)
    with caplog.at_level(logging.ERROR, logger="agl_events.store.follower"):
        append_foreign([event(Kind.WORKER_HEARTBEAT, "w9", clock(), "runner-x", worker_id="w9")])
        with pytest.raises(StoreUnhealthyError, match="reducer bug"):
            await asyncio.wait_for(waiting, 10)
    assert "stopped following the log" in caplog.text and "reducer bug" in caplog.text
    assert [str(f) for f in failures] == ["reducer bug"] and str(store.failure) == "reducer bug"
    with pytest.raises(StoreUnhealthyError):
        await store.enqueue_rollout(input=2)
    with pytest.raises(StoreUnhealthyError):
        await store.get_rollout_by_id(ar.rollout_id)
    with pytest.raises(StoreUnhealthyError, match="reducer bug"):  # told, not left waiting for the fold
        await asyncio.wait_for(finishing, 10)


@pytest.mark.kafka
async def test_the_view_stores_its_position_past_an_undecodable_record(bootstrap: str, experiment: str) -> None:
    """A record nobody can decode is dead-lettered once: the view's stored position moves past it with the batch
    (it used to stop at the last decoded event, so every restart read the record again and copied it again)."""
    create_topics(make_admin(bootstrap), experiment)
    writer = EventWriter(bootstrap, experiment, AvroCodec(), producer_id="garbage-writer")
    try:
        writer.produce_raw(topic_name(experiment, Topic.WORKERS), b"not an event", b"w-1", {})
        writer.flush()
    finally:
        writer.close()
    view = StoreView(DictKV())
    dead_lettered = []
    for _ in range(2):  # the store, then the store restarted from its view
        reader = EventReader(bootstrap, experiment, AvroCodec(), [Topic.WORKERS])
        reader.assign(view.positions)
        await follower.Follower(reader, view).catch_up()
        ends = {pos: end for pos, end in reader.end_offsets().items() if end}
        reader.close()
        dead_lettered.append(reader.dead_lettered)
    assert view.positions == ends and list(ends.values()) == [1]
    assert dead_lettered == [1, 0]


@pytest.mark.kafka
def test_the_reader_hands_on_a_known_event_instead_of_decoding_its_record(bootstrap: str, experiment: str) -> None:
    """A record at a position the caller already holds decoded (a store's own append) is not decoded again: the
    reader hands on the caller's event; the others are decoded as before."""
    create_topics(make_admin(bootstrap), experiment)
    writer = EventWriter(bootstrap, experiment, AvroCodec(), producer_id="store-x")
    try:
        first, second = writer.append_sync([event(Kind.WORKER_HEARTBEAT, f"w-{i}", 1.0, "store-x", worker_id=f"w-{i}")
                                            for i in range(2)])
    finally:
        writer.close()
    held = dataclasses.replace(first, record={"held": True})  # not what decoding the record would give
    at = (first.topic, first.partition, first.offset)
    reader = EventReader(bootstrap, experiment, AvroCodec(), [Topic.WORKERS],
                         known=lambda t, p, o: held if (t, p, o) == at else None)
    try:
        reader.assign()
        got: list[LoggedEvent] = []
        eventually(lambda: got.extend(reader.poll(10, 0.2)) or len(got) >= 2, "both records read")
    finally:
        reader.close()
    by_offset = {(e.partition, e.offset): e for e in got}
    assert by_offset[first.partition, first.offset] is held
    decoded = by_offset[second.partition, second.offset].record
    assert (decoded["event_id"], decoded["worker_id"]) == (second.record["event_id"], "w-1")


@pytest.mark.kafka
async def test_a_stores_own_events_come_back_whole_to_fold_listeners_and_are_let_go(settings: Settings,
                                                                                  tmp_path: Path) -> None:
    """The store's follower hands its own appends on as they were applied, not decoded again: listeners still get
    each once and whole (the finish announcement with its attempt), and none is held once read back."""
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", scan_debounce_seconds=3600)
    folded: list[LoggedEvent] = []
    store.add_fold_listener(folded.extend)
    try:
        queued = await store.enqueue_rollout({"q": 1})
        attempted = await store.dequeue_rollout("w1")
        assert attempted is not None
        await store.update_attempt(queued.rollout_id, attempted.attempt.attempt_id, status="succeeded")
        # The finish (spans topic) and the attempt (attempts topic) come back on different topics, in no set order.
        await eventually_async(lambda: {Kind.ROLLOUT_FINISHED, Kind.ATTEMPT_CREATED} <= {e.kind for e in folded},
                               "the finish and the attempt read back")
        finished = [e for e in folded if e.kind == Kind.ROLLOUT_FINISHED]
        assert [e.record["attempt"]["attempt_id"] for e in finished] == [attempted.attempt.attempt_id]
        assert [e.record["attempt"]["rollout_id"] for e in folded if e.kind == Kind.ATTEMPT_CREATED] == [
            queued.rollout_id]
        assert [e for e in folded if store.view.own_event(e.topic, e.partition, e.offset) is not None] == []
    finally:
        await store.close()


class _LateAcks(InMemoryLog):
    """While `holding`, an append's rollouts-topic records are readable at once and the rest of it, with its
    acknowledgement, waits for `release`: as Kafka hands a consumer one partition's record before the writer
    hears the ack, and another partition's later."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = False
        self._held: list[tuple[list[EncodedEvent], list[LoggedEvent], asyncio.Future[list[LoggedEvent]]]] = []

    def append(self, events: Sequence[EncodedEvent]) -> asyncio.Future[list[LoggedEvent]]:
        if not self.holding:
            return super().append(events)
        now = self.append_now([e.new for e in events if e.new.topic is Topic.ROLLOUTS])
        acked: asyncio.Future[list[LoggedEvent]] = asyncio.get_running_loop().create_future()
        self._held.append(([e for e in events if e.new.topic is not Topic.ROLLOUTS], now, acked))
        return acked

    def release(self) -> None:
        self.holding = False
        held, self._held = self._held, []
        for rest, now, acked in held:
            acked.set_result(now + self.append_now([e.new for e in rest]))


async def test_the_view_shows_a_commit_whole_though_the_log_hands_back_part_of_it_before_the_ack() -> None:
    """A finish is two events on two topics: the follower reading the rollout's before the store heard the ack
    waits for the commit, instead of showing a succeeded rollout whose attempt still runs."""
    log = _LateAcks()
    store, follower = store_over(StoreView(DictKV()), log)
    asked: list[list[LoggedEvent]] = []
    landing = follower.landing
    follower.landing = lambda events: asked.append(events) or landing(events)
    try:
        started = await store.start_rollout(input=1)
        log.holding = True
        finishing = asyncio.create_task(
            store.update_attempt(started.rollout_id, started.attempt.attempt_id, status="succeeded"))
        # The follower asks right before it would fold: from here the view holds either the whole commit or none.
        await eventually_async(lambda: any(e.kind == Kind.ROLLOUT_STATUS_CHANGED for b in asked for e in b),
                               "the follower read the rollout's new status")
        rollout = await store.get_rollout_by_id(started.rollout_id)
        attempts = await store.query_attempts(started.rollout_id)
        assert (rollout.status, [a.status for a in attempts]) == ("preparing", ["preparing"])
        log.release()
        await finishing
        rollout = await store.get_rollout_by_id(started.rollout_id)
        attempts = await store.query_attempts(started.rollout_id)
        assert (rollout.status, [a.status for a in attempts]) == ("succeeded", ["succeeded"])
    finally:
        log.release()
        await store.close()

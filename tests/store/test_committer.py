"""The group committer's pipeline, on a log whose acknowledgements the test releases by hand (no Kafka)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from agl_events.events.codec import AvroCodec
from agl_events.events.typed import ResourcesPublished, ResourcesSnapshot
from agl_events.log.encoding import EVENT_MAX_BYTES, EventTooLargeError, encode_event
from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent
from agl_events.store.committer import Committer
from agl_events.store.context import DecisionContext
from agl_events.store.errors import StoreUnhealthyError
from agl_events.views.kv import DictKV
from agl_events.views.store_view import StoreView
from tests.eventually import eventually_async


class HeldLog:
    """Appends are queued in call order and acknowledged (or failed) only when the test says so.
    Events are encoded as the real backends encode them (the codec and the size limit)."""

    def __init__(self) -> None:
        self.codec = AvroCodec()
        self.appended: list[list[NewEvent]] = []
        self.acks: list[asyncio.Future[list[LoggedEvent]]] = []
        self.logged: list[list[LoggedEvent]] = []
        self.offset = 0
        self.refusal: Exception | None = None

    def encode(self, new: NewEvent) -> bytes:
        return encode_event(self.codec, new)

    def append(self, events: Sequence[EncodedEvent]) -> asyncio.Future[list[LoggedEvent]]:
        if self.refusal is not None:
            error, self.refusal = self.refusal, None
            raise error
        logged = []
        for new in (e.new for e in events):
            logged.append(LoggedEvent(new.kind, new.key, new.record, new.topic.value, 0, self.offset))
            self.offset += 1
        ack: asyncio.Future[list[LoggedEvent]] = asyncio.get_running_loop().create_future()
        ack.add_done_callback(lambda f: f.exception())  # failed acks are the test's business, not a warning
        self.appended.append([e.new for e in events])
        self.acks.append(ack)
        self.logged.append(logged)
        return ack

    def refuse(self, error: Exception) -> None:
        """Make the next append raise `error` at once, as librdkafka's produce() does, instead of queueing."""
        self.refusal = error

    def release(self, index: int, error: Exception | None = None) -> None:
        if error is None:
            self.acks[index].set_result(self.logged[index])
        else:
            self.acks[index].set_exception(error)


def publish(version: int, resources_json: str = "{}") -> Callable[[DecisionContext], str | None]:
    """A command that publishes resources and returns what it read before (the previous latest id)."""
    def command(ctx: DecisionContext) -> str | None:
        before = ctx.latest_resources_id()
        ctx.emit(ResourcesPublished(resources=ResourcesSnapshot(
            resources_id=f"rs-{version}", version=version, create_time=float(version), update_time=float(version),
            resources_json=resources_json)))
        return before

    return command


Pipeline = tuple[Committer, HeldLog, StoreView]


@pytest.fixture
async def pipeline() -> AsyncIterator[Pipeline]:
    """A committer over a HeldLog and an empty view."""
    log, view = HeldLog(), StoreView(DictKV())
    committer = Committer(log, view, "test", on_applied=lambda _: None)
    yield committer, log, view
    await committer.close()


async def _appended(log: HeldLog, batches: int) -> None:
    """Until the log holds `batches` appends (the committer runs on this loop, so the wait yields to it)."""
    await eventually_async(lambda: len(log.appended), f"{batches} batches appended", within=2.0,
                           until=lambda count: count == batches)


async def _two_batches(committer: Committer, log: HeldLog) -> tuple[asyncio.Future[Any], asyncio.Future[Any]]:
    """Publish 1, then publish 2 while the first is still unacknowledged (waits until both are appended)."""
    first = asyncio.ensure_future(committer.run(publish(1)))
    await _appended(log, 1)
    second = asyncio.ensure_future(committer.run(publish(2)))
    await _appended(log, 2)
    return first, second


async def test_next_batch_is_decided_on_top_of_the_one_in_flight_and_answers_in_order(pipeline: Pipeline) -> None:
    committer, log, view = pipeline
    first, second = await _two_batches(committer, log)  # the second decided seeing the first's change
    assert view.get("meta/latest_resources") is None  # nothing is in the view before its ack
    log.release(1)
    await asyncio.sleep(0.01)
    assert not second.done()  # acknowledged, but answered only after the batch before it
    log.release(0)
    assert await first is None and await second == "rs-1"
    assert view.get("meta/latest_resources") == "rs-2"


async def test_a_failed_append_fails_the_batches_decided_on_top_of_it_and_later_ones_start_clean(
        pipeline: Pipeline) -> None:
    committer, log, view = pipeline
    first, second = await _two_batches(committer, log)
    log.release(1)
    log.release(0, RuntimeError("broker gone"))
    with pytest.raises(RuntimeError, match="broker gone"):
        await first
    with pytest.raises(RuntimeError, match="broker gone"):
        await second  # it was decided on a change that never happened
    third = asyncio.ensure_future(committer.run(publish(3)))
    await _appended(log, 3)
    log.release(2)
    assert await third is None  # decided on the view, which has neither failed batch
    assert view.get("meta/latest_resources") == "rs-3"


async def test_no_more_than_max_in_flight_batches_wait_for_acks() -> None:
    log, view = HeldLog(), StoreView(DictKV())
    committer = Committer(log, view, "test", on_applied=lambda _: None, max_in_flight=2)
    try:
        calls = [asyncio.ensure_future(committer.run(publish(1)))]
        await _appended(log, 1)  # each its own batch: appended before the next is asked
        calls.append(asyncio.ensure_future(committer.run(publish(2))))
        await _appended(log, 2)
        calls.append(asyncio.ensure_future(committer.run(publish(3))))
        await asyncio.sleep(0.01)  # a chance to be appended, which it must not take
        assert len(log.appended) == 2  # the third waits for a slot
        log.release(0)
        await _appended(log, 3)
        log.release(1)
        log.release(2)
        assert [await c for c in calls] == [None, "rs-1", "rs-2"]
    finally:
        await committer.close()


async def test_an_append_that_raises_fails_its_batch_and_the_ones_on_top_and_the_store_keeps_serving(
        pipeline: Pipeline) -> None:
    committer, log, view = pipeline
    async with asyncio.timeout(5):  # a refused batch left incomplete would hang it and every later one
        first = asyncio.ensure_future(committer.run(publish(1)))
        await _appended(log, 1)
        log.refuse(RuntimeError("message too large"))
        refused = asyncio.ensure_future(committer.run(publish(2)))
        await eventually_async(lambda: log.refusal is None,  # its append was tried (and raised): a batch of its own
                               "the refused append tried", within=2.0)
        on_top = asyncio.ensure_future(committer.run(publish(3)))  # decided seeing the refused change
        await _appended(log, 2)
        log.release(0)
        log.release(1)
        assert await first is None
        with pytest.raises(RuntimeError, match="message too large"):
            await refused
        with pytest.raises(RuntimeError, match="message too large"):
            await on_top
        after = asyncio.ensure_future(committer.run(publish(4)))
        await _appended(log, 3)
        log.release(2)
        assert await after == "rs-1"  # decided on the view: neither failed batch is in it
        assert view.get("meta/latest_resources") == "rs-4"


async def test_an_event_too_large_for_the_log_fails_only_its_command(pipeline: Pipeline) -> None:
    committer, log, view = pipeline
    calls = [asyncio.ensure_future(committer.run(publish(1))),  # all three in one batch
             asyncio.ensure_future(committer.run(publish(2, json.dumps("x" * EVENT_MAX_BYTES)))),
             asyncio.ensure_future(committer.run(publish(3)))]
    await _appended(log, 1)
    assert [new.key for new in log.appended[0]] == ["rs-1", "rs-3"]
    log.release(0)
    first, refused, third = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(refused, EventTooLargeError) and f"the limit is {EVENT_MAX_BYTES} bytes" in str(refused)
    assert first is None and third == "rs-1"  # decided without the refused command's change
    assert view.get("meta/latest_resources") == "rs-3"


async def test_a_batch_the_view_cannot_fold_fails_its_callers_and_the_store_instead_of_hanging(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found fuzzing the API: a span attribute beyond 64 bits was logged but broke the view's JSON, and the
    batch's caller and every later command waited forever."""
    log, view = HeldLog(), StoreView(DictKV())
    failures: list[BaseException] = []
    committer = Committer(log, view, "test", on_applied=lambda _: None, on_fold_failure=failures.append)

    def unfoldable(events: Any) -> None:
        raise TypeError("Integer exceeds 64-bit range")

    monkeypatch.setattr(view, "apply_own", unfoldable)
    try:
        first, second = await _two_batches(committer, log)
        log.release(0)
        log.release(1)
        for call in (first, second):  # the second was decided on top of the batch the view lacks
            with pytest.raises(StoreUnhealthyError, match=r"could not fold .* 64-bit range"):
                await asyncio.wait_for(call, 2)
        assert [str(f) for f in failures] == [f"the view could not fold events already in the log: "
                                              f"{TypeError('Integer exceeds 64-bit range')!r}"]
    finally:
        await committer.close()


class AckingLog(HeldLog):
    """A HeldLog that acknowledges every append on the loop's next turn, as a quick broker would."""

    def append(self, events: Sequence[EncodedEvent]) -> asyncio.Future[list[LoggedEvent]]:
        ack = super().append(events)
        asyncio.get_running_loop().call_soon(self.release, len(self.acks) - 1)
        return ack


async def test_a_flood_of_commands_waits_for_room_and_all_complete_within_the_bound() -> None:
    log, view = AckingLog(), StoreView(DictKV())
    committer = Committer(log, view, "test", on_applied=lambda _: None, max_batch=3, max_in_flight=2,
                          max_queued=8)
    seen: list[int] = []

    def counted(version: int) -> Callable[[DecisionContext], str | None]:
        def command(ctx: DecisionContext) -> str | None:
            seen.append(committer.queued)  # commands taken and not yet answered, while this one is decided
            return publish(version)(ctx)

        return command

    try:
        results = await asyncio.gather(*[committer.run(counted(v)) for v in range(1, 201)])
    finally:
        await committer.close()
    assert len(results) == 200 and sum(len(batch) for batch in log.appended) == 200  # all done, none dropped
    assert view.get("meta/latest_resources") == "rs-200"
    assert max(seen) <= 8 and committer.queued == 0
    assert committer.backpressure.stats.waits >= 200 - 8  # every caller past the first 8 waited for room

"""Rollouts left queued unclaimed are announced again: the runners' share group archives a task record handed out
more times than its delivery count limit (a busy runner stepping aside and handing back what it fetched ahead
counts each time), and nothing else would ever run that rollout."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.share import Outcome, ShareMember, configure_share_group
from agl_events.runner.tasks import TASK_LOCK_MS, Task, TaskQueue, share_group
from agl_events.store.commands.unclaimed import Unclaimed
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.watchdog import REDISPATCH_AFTER_SECONDS
from agl_events.topics import Topic, topic_name
from tests.conftest import FakeClock
from tests.eventually import eventually, eventually_async


class _Queue:
    """`Unclaimed` fed as the view feeds it: what changed between two whole queues, as written entries."""

    def __init__(self, after: float) -> None:
        self._unclaimed = Unclaimed(after)
        self._last: dict[str, str] = {}

    def due(self, queue: list[tuple[str, str]], now: float) -> list[str]:
        current = dict(queue)
        self._unclaimed.written([(entry, None) for entry in self._last if entry not in current] +
                                [(entry, rid) for entry, rid in current.items() if entry not in self._last])
        self._last = current
        return self._unclaimed.due(now)


def test_an_entry_is_due_after_waiting_then_after_twice_as_long_and_afresh_once_requeued() -> None:
    unclaimed = _Queue(after=10)
    assert unclaimed.due([("q/1", "r1")], now=100) == []
    assert unclaimed.due([("q/1", "r1")], now=109) == []
    assert unclaimed.due([("q/1", "r1")], now=110) == ["r1"]
    assert unclaimed.due([("q/1", "r1")], now=119) == []  # next at 100 + 20
    assert unclaimed.due([("q/1", "r1")], now=120) == ["r1"]
    assert unclaimed.due([("q/1", "r1")], now=139) == []  # next at 100 + 40
    assert unclaimed.due([], now=150) == []  # claimed: forgotten
    assert unclaimed.due([("q/2", "r1")], now=151) == []  # requeued at a new place: waits afresh
    assert unclaimed.due([("q/2", "r1")], now=161) == ["r1"]


def test_a_long_queue_moving_in_order_announces_nothing_again() -> None:
    unclaimed = _Queue(after=10)
    queue = [(f"q/{n:03d}", f"r{n}") for n in range(50)]
    for now in range(100, 150):  # one taken from the head a second, for 50 s: every entry waits past `after`
        assert unclaimed.due(queue, now=now) == []
        queue = queue[1:]


def test_an_entry_overtaken_by_later_ones_or_left_in_a_still_queue_is_announced_again() -> None:
    unclaimed = _Queue(after=10)
    assert unclaimed.due([("q/1", "lost"), ("q/2", "a")], now=100) == []
    assert unclaimed.due([("q/1", "lost"), ("q/3", "b")], now=105) == []  # a taken: the queue moves
    assert unclaimed.due([("q/1", "lost"), ("q/3", "b"), ("q/4", "c")], now=110) == []  # waited, not overtaken
    # c, queued 10 s after the lost one, is taken first: the lost one's record was skipped
    assert unclaimed.due([("q/1", "lost"), ("q/3", "b")], now=112) == ["lost"]
    still = _Queue(after=10)
    assert still.due([("q/1", "a"), ("q/2", "b")], now=100) == []
    assert still.due([("q/2", "b")], now=105) == []  # a taken: the queue moved at 105
    assert still.due([("q/2", "b")], now=114) == []
    assert still.due([("q/2", "b")], now=115) == ["b"]  # nothing taken for 10 s


def test_an_entry_due_again_while_the_queue_moves_is_announced_once_the_queue_stands_still() -> None:
    unclaimed = _Queue(after=10)
    assert unclaimed.due([("q/1", "a"), ("q/2", "b")], now=100) == []
    assert sorted(unclaimed.due([("q/1", "a"), ("q/2", "b")], now=110)) == ["a", "b"]  # still: due again at 120
    assert unclaimed.due([("q/1", "a")], now=112) == []  # b taken: the queue moves
    assert unclaimed.due([("q/1", "a")], now=120) == []  # due, but the queue moved 8 s ago
    assert unclaimed.due([("q/1", "a")], now=121) == []
    assert unclaimed.due([("q/1", "a")], now=122) == ["a"]  # nothing taken for 10 s
    assert unclaimed.due([("q/1", "a")], now=143) == []  # next at 122 + 22


def _hand_out_and_release(member: ShareMember, times: int) -> None:
    """Acquire the one task record `times` times, handing it back each time (as a runner stepping aside does)."""
    for _ in range(times):
        acquired = eventually(lambda: member.poll(0.2), "the task record handed out")
        member.settle(acquired[0], Outcome.RELEASE)


@pytest.mark.kafka
async def test_a_task_record_the_share_group_archived_is_dispatched_again_and_claimed_once(
        settings: Settings, tmp_path: Path, clock: FakeClock) -> None:
    bootstrap = settings.bootstrap_servers
    configure_share_group(bootstrap, share_group(settings.experiment), TASK_LOCK_MS, delivery_limit=2)
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", scan_debounce_seconds=0,
                                           clock=clock)
    queue: TaskQueue | None = None
    try:
        rollout = await store.enqueue_rollout(input={"n": 1})
        member = ShareMember(bootstrap, share_group(settings.experiment))
        member.subscribe(topic_name(settings.experiment, Topic.TASKS))
        try:
            await asyncio.to_thread(_hand_out_and_release, member, 2)
            assert await asyncio.to_thread(member.poll, 1.0) == []  # archived: the broker hands it out no more
        finally:
            member.close()
        queue = TaskQueue(bootstrap, settings.experiment, AvroCodec(), "r1")

        async def next_task() -> list[Task]:
            clock.advance(REDISPATCH_AFTER_SECONDS)  # unclaimed for long, as the store's clock sees it
            return await asyncio.to_thread(queue.next_tasks, 0.5)

        tasks = await eventually_async(next_task, "the rollout announced again")
        assert [task.rollout_id for task in tasks] == [rollout.rollout_id]
        assert await store.claim_rollout(rollout.rollout_id, "r1") is not None
        assert await store.claim_rollout(rollout.rollout_id, "r2") is None  # any further announcement: refused
        queue.done(tasks[0])
    finally:
        if queue is not None:
            await asyncio.to_thread(queue.close)
        await store.close()

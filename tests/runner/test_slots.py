"""Waiting for a free slot: a runner busy in every slot steps aside from the task group, and its rollouts may all
end while it does (stepping aside takes broker round trips, seconds while a broker restarts)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from agl_events.runner.tasks import Task
from agl_events.runner.worker import wait_for_a_slot
from tests.eventually import eventually_async


class SlowToStepAside:
    """A task queue whose step-aside lasts until the test lets it end, as a restarting broker's does."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[str] = []

    def give_back(self, task: Task) -> None:
        self.calls.append("give_back")

    def step_aside(self) -> None:
        self.calls.append("step_aside")
        assert self.release.wait(10)

    def rejoin(self) -> None:
        self.calls.append("rejoin")


class FailingToStepAside(SlowToStepAside):
    """A task queue whose step-aside fails as leaving the share group can while a broker restarts: it sends the
    pending acknowledgements first (`ShareMember.unsubscribe`), and that commit raises."""

    def step_aside(self) -> None:
        self.calls.append("step_aside")
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit_sync timed out"))


@pytest.mark.parametrize("kind", [SlowToStepAside, FailingToStepAside], ids=["slow", "failing"])
async def test_a_rollout_ending_while_the_runner_steps_aside_frees_its_slot(kind: type[SlowToStepAside]) -> None:
    """Slow: the rollouts may all end while the runner steps aside, leaving nothing to wait for. Failing: stepping
    aside only spares idle runners a wait, so failing to is no reason to end the runner (it did: the
    KafkaException left the runner's loop, and the process exited). Either way the runner rejoins the group."""
    queue = kind()
    ended = asyncio.Event()
    rollout = asyncio.create_task(ended.wait())
    running = {rollout}
    rollout.add_done_callback(running.discard)

    async def end_the_rollout_then_the_step_aside() -> None:
        await eventually_async(lambda: "step_aside" in queue.calls, "the runner stepping aside")
        ended.set()
        await rollout
        queue.release.set()

    helper = asyncio.create_task(end_the_rollout_then_the_step_aside())
    await asyncio.wait_for(wait_for_a_slot(running, queue, [], step_aside_after=0.05), 10)
    await helper
    assert running == set() and queue.calls == ["step_aside", "rejoin"]

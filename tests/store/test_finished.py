"""RolloutFinished: appended to the rollout's span partition once, when it reaches a final status."""

from __future__ import annotations

import asyncio

from agl_events.store.memory import InMemoryLightningStore
from agl_events.topics import Topic
from agl_events.types import PromptTemplate


def _finished(store: InMemoryLightningStore) -> list[dict]:
    return [e.record for e in store.log.topics.get(Topic.SPANS.value, []) if e.kind == "RolloutFinished"]


async def test_a_finish_is_announced_once_with_the_attempt_and_resources_generation() -> None:
    store = InMemoryLightningStore(scan_debounce_seconds=0)
    try:
        first = await store.add_resources({"p": PromptTemplate(template="v1", engine="f-string")})
        second = await store.add_resources({"p": PromptTemplate(template="v2", engine="f-string")})
        queued = await store.enqueue_rollout({"q": 1}, mode="train", resources_id=first.resources_id)
        attempted = await store.dequeue_rollout("w1")
        assert attempted is not None and _finished(store) == []
        await store.update_attempt(queued.rollout_id, attempted.attempt.attempt_id, status="succeeded")
        await store.update_rollout(queued.rollout_id, status="failed")  # final -> final: no second marker
        [record] = _finished(store)
        assert record["rollout"]["rollout_id"] == queued.rollout_id and record["rollout"]["status"] == "succeeded"
        assert record["attempt"]["attempt_id"] == attempted.attempt.attempt_id
        assert record["resources_generation"] == 1
        later = await store.enqueue_rollout({"q": 2}, resources_id=second.resources_id)
        await store.update_rollout(later.rollout_id, status="cancelled")
        assert [r["resources_generation"] for r in _finished(store)] == [1, 2]
        assert _finished(store)[1]["attempt"] is None  # cancelled before any attempt
    finally:
        await store.close()


async def test_generations_follow_each_publish_and_a_snapshot_decided_in_the_same_batch() -> None:
    """The view ranks the snapshots once per publish, not at every finish: a snapshot published after a finish
    still counts for the next, and one decided in the same commit batch as a finish counts for it."""
    store = InMemoryLightningStore(scan_debounce_seconds=0)
    template = {"p": PromptTemplate(template="v", engine="f-string")}
    try:
        first = await store.add_resources(template)
        one = await store.enqueue_rollout({"q": 1}, resources_id=first.resources_id)
        await store.update_rollout(one.rollout_id, status="cancelled")
        second = await store.add_resources(template)
        two = await store.enqueue_rollout({"q": 2}, resources_id=second.resources_id)
        await store.update_rollout(two.rollout_id, status="cancelled")
        three = await store.enqueue_rollout({"q": 3}, resources_id="rs-third")
        await asyncio.gather(store.update_resources("rs-third", template),
                             store.update_rollout(three.rollout_id, status="cancelled"))
        assert [r["resources_generation"] for r in _finished(store)] == [1, 2, 3]
    finally:
        await store.close()

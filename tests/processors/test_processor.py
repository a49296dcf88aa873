"""The view processor against the real broker: workers as subprocesses, events written by the real store.

What is checked, and why:
- a worker folds everything the store wrote into its per-partition views: summed entity counts equal
  the store's `statistics()`, and a garbage record goes to the DLQ without stopping it;
- `kill -9` and a restart on the same data dir resume from the views' own positions: the restarted
  worker folds exactly the new events (none re-folded, none skipped);
- two fresh workers share the partitions (disjoint, covering every view partition) and rebuild from
  offset 0 although the group has committed offsets from the earlier runs.

Deadlines only bound how long we wait for the workers to catch up; nothing asserts on timing.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from agl_events.config import Settings
from agl_events.processors.background import WorkerProcess, stopped_on_exit
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import LAYOUT, VIEW_TOPICS, Topic, partition_of, topic_name
from tests.eventually import eventually, eventually_async
from tests.store import llm, make_span

pytestmark = pytest.mark.kafka

ENTITIES = ("rollouts", "attempts", "spans", "resources", "workers")
DEADLINE = 90.0
GARBAGE = b"\x00not an agl-events record"


class Worker(WorkerProcess):
    """One `python -m agl_events.processors.views` worker with its own web port, data dir and log file."""

    def __init__(self, settings: Settings, data_dir: Path, log_file: Path) -> None:
        super().__init__(settings, "agl_events.processors.views",
                         ["--data-dir", str(data_dir), "--loglevel", "info"], log_file)

    async def stats(self, client: httpx.AsyncClient) -> dict[str, Any] | None:
        """The worker's /views/stats, or None while it is not serving yet."""
        assert self.alive(), f"worker exited ({self.process.returncode}):\n{self.tail()}"
        try:
            response = await client.get(f"{self.url}/views/stats", timeout=5.0)
        except httpx.TransportError:
            return None
        return response.json() if response.status_code == 200 else None


def _view_partitions(experiment: str) -> set[tuple[str, int]]:
    counts = {spec.topic: spec.partitions for spec in LAYOUT}
    return {(topic_name(experiment, t), p) for t in VIEW_TOPICS for p in range(counts[t])}


async def _expected(store: KafkaLightningStore) -> dict[str, int]:
    stats = await store.statistics()
    return {f"n/{entity}": stats[f"total_{entity}"] for entity in ENTITIES}


def _counts(stats: list[dict[str, Any]]) -> dict[str, int]:
    total = dict.fromkeys((f"n/{e}" for e in ENTITIES), 0)
    for worker_stats in stats:
        for name, value in worker_stats["counts"].items():
            total[name] = total.get(name, 0) + value
    return total


async def _until(check: Callable[[], Awaitable[Any]], what: str, running: list[Worker]) -> Any:
    """`check()` once it returns something truthy; at the deadline, the failure shows the workers' logs."""
    return await eventually_async(check, what, within=DEADLINE, context=lambda: "\n".join(
        f"--- {w.log_file.name} ---\n{w.tail()}" for w in running))


def _ends(bootstrap: str, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The log end offset (high watermark) of every view partition: where caught-up views stand."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "processor-test-watermarks"})
    try:
        return {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1] for t, p in partitions}
    finally:
        consumer.close()


async def _caught_up(client: httpx.AsyncClient, running: list[Worker], expected: dict[str, int],
                     ends: dict[tuple[str, int], int]) -> list[dict[str, Any]] | None:
    """All workers' stats once they hold every partition exactly once, each at the end of its log,
    and their counts add up to the store's."""
    stats = [await w.stats(client) for w in running]
    if any(s is None for s in stats):
        return None
    held = [tuple(p) for s in stats for p in s["assigned"]]  # type: ignore[index]
    if len(held) != len(set(held)) or set(held) != set(ends):
        return None
    offsets = {(p["topic"], p["partition"]): p["next_offset"] for s in stats for p in s["partitions"]}  # type: ignore[index]
    if offsets != ends:
        return None
    return stats if _counts(stats) == expected else None  # type: ignore[arg-type,return-value]


async def _write(store: KafkaLightningStore, rollouts: int, dequeue: int, worker: str) -> list[str]:
    """Enqueue, dequeue (attempts, worker status), spans on the dequeued ones, a worker heartbeat."""
    ids = [(await store.enqueue_rollout(input={"i": i})).rollout_id for i in range(rollouts)]
    for _ in range(dequeue):
        claimed = await store.dequeue_rollout(worker_id=worker)
        assert claimed is not None
        for seq in range(1, 4):
            await store.add_span(make_span(claimed.rollout_id, claimed.attempt.attempt_id, seq))
    await store.update_worker(worker, heartbeat_stats={"gpu": 0.5})
    return ids


def _dead_letters(bootstrap: str, experiment: str, expected: int, deadline: float = 30.0) -> list[Any]:
    """Read the experiment's DLQ until `expected` records are there."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dlq-check-{experiment}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic_name(experiment, Topic.DLQ)])
    found: list[Any] = []

    def read() -> list[Any]:
        found.extend(m for m in consumer.consume(100, 0.5) if m.error() is None)
        return found

    try:
        return eventually(read, f"{expected} dead letters", within=deadline, until=lambda got: len(got) >= expected)
    finally:
        consumer.close()


async def test_workers_fold_restart_and_share_partitions(settings: Settings, bootstrap: str,
                                                         tmp_path: Path) -> None:
    experiment = settings.experiment
    partitions = _view_partitions(experiment)
    rollouts_topic = topic_name(experiment, Topic.ROLLOUTS)
    # No watchdog scans during the test: the store writes only what the test asks for.
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "store", scan_debounce_seconds=3600)
    try:
        async with httpx.AsyncClient() as client:
            with stopped_on_exit(signal.SIGKILL) as running:
                # -- one worker folds everything, and dead-letters the garbage ------------------------
                first = Worker(settings, tmp_path / "a", tmp_path / "worker-a.log")
                running.append(first)
                producer = Producer({"bootstrap.servers": bootstrap})
                producer.produce(rollouts_topic, GARBAGE, key=b"garbage", partition=0)
                producer.flush(30)
                await store.add_resources({"main": llm("a")})
                await store.add_resources({"main": llm("b")})
                ids = await _write(store, rollouts=50, dequeue=10, worker="runner-1")
                expected = await _expected(store)
                assert expected["n/rollouts"] == 50 and expected["n/spans"] == 30
                ends = _ends(bootstrap, partitions)
                [stats] = await _until(lambda: _caught_up(client, [first], expected, ends),
                                       "the first worker to catch up", running)
                garbage_partition = next(p for p in stats["partitions"]
                                         if (p["topic"], p["partition"]) == (rollouts_topic, 0))
                assert garbage_partition["next_offset"] > 1  # moved past the garbage at offset 0
                assert stats["counters"]["dead_lettered"] == 1
                # The store's own reader dead-letters the garbage too (same format): one copy each. The wait
                # above was for the worker; the store's follower reads the same record on its own time.
                async def store_dead_lettered() -> bool:
                    return store.dead_lettered >= 1

                await _until(store_dead_lettered, "the store's reader to dead-letter the garbage", running)
                assert store.dead_lettered == 1
                letters = _dead_letters(bootstrap, experiment, expected=2)
                assert len(letters) == 2
                for letter in letters:
                    headers = dict(letter.headers())
                    assert letter.value() == GARBAGE and letter.key() == b"garbage"
                    assert headers["agl.source.topic"] == rollouts_topic.encode()
                    assert headers["agl.source.partition"] == b"0" and headers["agl.source.offset"] == b"0"
                    assert headers["agl.error.type"] == b"CorruptRecordError"

                # The rollout endpoint answers from the view; the 404 names the owning partition.
                response = await client.get(f"{first.url}/views/rollouts/{ids[0]}")
                assert response.status_code == 200 and response.json()["rollout_id"] == ids[0]
                missing = await client.get(f"{first.url}/views/rollouts/ro-nosuchthing")
                assert missing.status_code == 404
                assert missing.json()["partition"] == partition_of("ro-nosuchthing", 3)

                # -- kill -9, restart on the same folder, write more: exactly the new events fold ----
                before = ends  # the views stand at the end of every partition (checked by _caught_up)
                first.stop(signal.SIGKILL)
                again = Worker(settings, tmp_path / "a", tmp_path / "worker-a2.log")
                running.append(again)
                await _write(store, rollouts=10, dequeue=5, worker="runner-2")
                expected = await _expected(store)
                ends = _ends(bootstrap, partitions)
                [stats] = await _until(lambda: _caught_up(client, [again], expected, ends),
                                       "the restarted worker to catch up", running)
                after = ends
                assert stats["counters"]["redelivered"] == 0  # it resumed at the views' positions
                assert stats["counters"]["dead_lettered"] == 0  # the garbage was behind them
                assert stats["counters"]["folded"] == sum(after[p] - before[p] for p in partitions)

                # Ctrl-C (SIGINT) stops a worker cleanly: it leaves the group, exit status 0.
                assert again.stop(signal.SIGINT) == 0, again.tail()

                # -- two fresh workers share the partitions and rebuild from offset 0 ----------------
                pair = [Worker(settings, tmp_path / "b", tmp_path / "worker-b.log"),
                        Worker(settings, tmp_path / "c", tmp_path / "worker-c.log")]
                running.extend(pair)

                async def shared() -> list[dict[str, Any]] | None:
                    stats = await _caught_up(client, pair, expected, ends)
                    return stats if stats and all(s["assigned"] for s in stats) else None

                both = await _until(shared, "two workers to share the partitions", running)
                assigned = [{tuple(p) for p in s["assigned"]} for s in both]
                assert not assigned[0] & assigned[1] and assigned[0] | assigned[1] == partitions
                # _caught_up checked every view stands at the end of its log again, rebuilt from offset 0.
                # Everything but the garbage was folded (more if a partition moved from one to the other).
                assert sum(s["counters"]["folded"] for s in both) >= sum(ends.values()) - 1

                # Exactly one worker holds a given rollout; the other's 404 points at the owner's partition.
                answers = [await client.get(f"{w.url}/views/rollouts/{ids[1]}") for w in pair]
                assert sorted(a.status_code for a in answers) == [200, 404]
                owner = next(i for i, a in enumerate(answers) if a.status_code == 200)
                miss = answers[1 - owner].json()
                assert (miss["topic"], miss["partition"]) in assigned[owner]
    finally:
        await store.close()

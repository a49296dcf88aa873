"""Share group (KIP-932) against a classic consumer group as the runners' task queue.

    python -m agl_events.bench.task_queue [--tasks 200] [--consumers 4]

Consumers in threads take one task at a time and "work" on it: 90% take 20 ms, 10% take 1 s (a slow
rollout). Reported: makespan (first task produced to last done) and task wait (produced to picked up),
p50/p99. With a classic group a slow task blocks its partition; with a share group, any idle consumer
takes the next task.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable

from agl_events.bench.store_latency import percentile
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import create_topic
from agl_events.log.clients import make_admin, make_producer
from agl_events.log.consumer import GroupConsumer
from agl_events.log.records import RawRecord
from agl_events.log.share import Acquired, Outcome, ShareMember, configure_share_group
from agl_events.runner.tasks import TASK_DELIVERY_LIMIT, TASK_LOCK_MS


def _topic_with_tasks(bootstrap: str, tasks: int, partitions: int) -> tuple[str, dict[int, float]]:
    topic = f"bench-queue-{uuid.uuid4().hex[:8]}"
    create_topic(make_admin(bootstrap), topic, partitions)
    rng = random.Random(1)
    work = {i: (1.0 if rng.random() < 0.1 else 0.02) for i in range(tasks)}
    producer = make_producer(bootstrap, "bench-queue", **{"batch.num.messages": 1, "linger.ms": 0})
    for i in range(tasks):
        producer.produce(topic, key=str(i).encode(), value=json.dumps({"i": i, "t": time.time()}).encode())
    producer.flush(30)
    return topic, work


#: A task taken from the queue, and what marks it done.
Taken = list[tuple[RawRecord, Callable[[], None]]]


class _Shared:
    """A share-group member taking one task at a time (as a runner with one slot)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self._member = ShareMember(bootstrap, group)
        self._member.subscribe(topic)

    def take(self) -> Taken:
        return [(acquired.record, functools.partial(self._settle, acquired)) for acquired in self._member.poll(0.1)]

    def _settle(self, acquired: Acquired) -> None:
        self._member.settle(acquired, Outcome.ACCEPT)

    def close(self) -> None:
        self._member.close()


class _Classic:
    """A classic consumer-group member: a partition's tasks in order, its progress committed per task."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self._consumer = GroupConsumer(bootstrap, group, "bench", **{"enable.partition.eof": False})
        self._consumer.subscribe(topic)

    def take(self) -> Taken:
        return [(record, functools.partial(self._consumer.commit, {record.position: record.offset + 1}, False))
                for record in self._consumer.consume(1, 0.1)]

    def close(self) -> None:
        self._consumer.close()


def _consume(make: Callable[[], _Shared | _Classic], work: dict[int, float], total: int, consumers: int
             ) -> dict[str, float]:
    waits: list[float] = []
    done = threading.Event()
    lock = threading.Lock()
    finished = [0]

    def consumer_loop() -> None:
        consumer = make()
        while not done.is_set():
            for record, mark_done in consumer.take():
                task = json.loads(record.value or b"{}")
                with lock:
                    waits.append((time.time() - task["t"]) * 1000)
                time.sleep(work[task["i"]])
                mark_done()
                with lock:
                    finished[0] += 1
                    if finished[0] >= total:
                        done.set()
        consumer.close()

    started = time.time()
    threads = [threading.Thread(target=consumer_loop) for _ in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return {"makespan_s": time.time() - started, "wait_p50_ms": statistics.median(waits),
            "wait_p99_ms": percentile(waits, 0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    bootstrap = ensure_broker(Settings.from_env())
    results = {}
    for kind in ("share", "classic"):
        topic, work = _topic_with_tasks(bootstrap, args.tasks, args.partitions)
        group = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
        if kind == "share":
            configure_share_group(bootstrap, group, TASK_LOCK_MS, TASK_DELIVERY_LIMIT)
        queue = _Shared if kind == "share" else _Classic
        results[kind] = _consume(functools.partial(queue, bootstrap, group, topic), work, args.tasks, args.consumers)
        make_admin(bootstrap).delete_topics([topic])
    for kind, figures in results.items():
        print(kind, {k: round(v, 1) for k, v in figures.items()})
    print(json.dumps(results))


if __name__ == "__main__":
    main()

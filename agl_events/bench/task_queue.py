"""Share group (KIP-932) against a classic consumer group as the runners' task queue.

    python -m agl_events.bench.task_queue [--tasks 200] [--consumers 4]

Consumers in threads take one task at a time and "work" on it: 90% take 20 ms, 10% take 1 s (a slow
rollout). Reported: makespan (first task produced to last done) and task wait (produced to picked up),
p50/p99. With a classic group a slow task blocks its partition; with a share group, any idle consumer
takes the next task.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import NewTopic

from agl_events.bench.store_latency import percentile
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import wait_for_leaders
from agl_events.log.clients import make_admin
from agl_events.runner.tasks import configure_share_group


def _topic_with_tasks(bootstrap: str, tasks: int, partitions: int) -> tuple[str, dict[int, float]]:
    admin = make_admin(bootstrap)
    topic = f"bench-queue-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    wait_for_leaders(admin, [topic], 30)
    rng = random.Random(1)
    work = {i: (1.0 if rng.random() < 0.1 else 0.02) for i in range(tasks)}
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
    for i in range(tasks):
        producer.produce(topic, key=str(i).encode(), value=json.dumps({"i": i, "t": time.time()}).encode())
    producer.flush(30)
    return topic, work


def _consume(make: object, topic: str, work: dict[int, float], total: int, share: bool, consumers: int
             ) -> dict[str, float]:
    waits: list[float] = []
    done = threading.Event()
    lock = threading.Lock()
    finished = [0]

    def consumer_loop() -> None:
        consumer = make()  # type: ignore[operator]
        consumer.subscribe([topic])
        while not done.is_set():
            polled = consumer.poll(0.1)
            messages = list(polled) if share else ([polled] if polled is not None else [])
            for message in messages:
                if message.error() is not None:
                    continue
                task = json.loads(message.value())
                with lock:
                    waits.append((time.time() - task["t"]) * 1000)
                time.sleep(work[task["i"]])
                if share:
                    consumer.acknowledge(message)
                else:
                    consumer.commit(message=message, asynchronous=True)
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
            configure_share_group(make_admin(bootstrap), group)

            def make(group: str = group) -> ShareConsumer:
                return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
                                      "share.acknowledgement.mode": "explicit", "max.poll.records": 1})
        else:
            def make(group: str = group) -> Consumer:  # type: ignore[misc]
                return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                 "auto.offset.reset": "earliest"})
        results[kind] = _consume(make, topic, work, args.tasks, kind == "share", args.consumers)
        make_admin(bootstrap).delete_topics([topic])
    for kind, figures in results.items():
        print(kind, {k: round(v, 1) for k, v in figures.items()})
    print(json.dumps(results))


if __name__ == "__main__":
    main()

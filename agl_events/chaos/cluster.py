"""The chaos run's cluster actions: SIGKILL the leader of the busiest partitions and time the failover, restart it;
a rolling restart of every node. While an action blocks (a node starting, replicas catching up), the deployment's
supervisor is ticked on (`heal`), as it is between actions.

Failover time is measured as a client sees it: from the SIGKILL to the next acknowledged append on the partitions
the killed node led, i.e. until their high watermark (the end of what every in-sync replica has) grows past where
it was at the kill. Only partitions that were being written just before the kill are timed: an idle partition
has no next append to wait for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from pydantic import BaseModel

from agl_events.broker.cluster import LocalCluster
from agl_events.log.admin import end_offsets, partition_leaders
from agl_events.log.clients import LogError, make_admin
from agl_events.log.records import Position

T = TypeVar("T")
Say = Callable[[str], None]
#: Seconds over which partitions' appends are counted to find the busiest before a kill.
BUSY_WINDOW_SECONDS = 1.0
#: Seconds a node gets to come back (start, register, catch its replicas up) after a kill or within a rolling restart.
NODE_TIMEOUT_SECONDS = 120.0


class Failover(BaseModel):
    """One leader kill: which node, how many busy partitions it led, and how long until appends were acknowledged
    again on them (the first, and every one of them: None where none came within the wait)."""

    node: int
    partitions: int
    first_seconds: float | None
    all_seconds: float | None


def while_healing(action: Callable[[], T], heal: Callable[[], None]) -> T:
    """Run `action` in a thread and tick `heal` until it returns; its result, or its exception raised here."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(action)
        while not future.done():
            heal()
            time.sleep(0.2)
        return future.result()


def kill_busiest_leader(cluster: LocalCluster, topics: list[str], heal: Callable[[], None], say: Say,
                        wait: float = 60.0) -> Failover:
    """SIGKILL the leader of the partition of `topics` with the most appends over the last second, time the
    failover of every busy partition it led, then start it again and wait until its replicas are in sync, so
    that the next kill is again the loss of a minority."""
    admin = make_admin(cluster.bootstrap, log_level=0)
    leaders = partition_leaders(admin, topics)
    before = end_offsets(admin, list(leaders))
    time.sleep(BUSY_WINDOW_SECONDS)
    marks = end_offsets(admin, list(leaders))
    growth = {p: marks[p] - before[p] for p in marks if p in before}
    busiest = max(growth, key=lambda p: growth[p])
    victim = leaders[busiest]
    busy = [p for p, leader in leaders.items() if leader == victim and growth.get(p, 0) > 0]
    started = time.monotonic()
    cluster.node(victim).kill()
    say(f"killed node {victim} (SIGKILL), leader of {len(busy)} busy partitions, {busiest[0]}/{busiest[1]} the "
        f"busiest ({growth[busiest]} appends in {BUSY_WINDOW_SECONDS:g} s)")
    acknowledged = _acknowledged_after(cluster.bootstrap, {p: marks[p] for p in busy}, started, heal, wait)
    first = round(min(acknowledged.values()), 2) if acknowledged else None
    every = round(max(acknowledged.values()), 2) if len(acknowledged) == len(busy) and busy else None
    say(f"failover of node {victim}: first acknowledged append after {first} s, on all {len(busy)} after {every} s")
    while_healing(lambda: _bring_back(cluster, victim), heal)
    say(f"node {victim} back and in sync")
    return Failover(node=victim, partitions=len(busy), first_seconds=first, all_seconds=every)


def rolling_restart(cluster: LocalCluster, heal: Callable[[], None], say: Say) -> float:
    """Stop and start each node in turn (a clean stop moves its leaders first), each back in sync before the next
    goes: the seconds it took."""
    started = time.monotonic()
    for node in cluster.nodes:
        node_id = node.node.node_id
        while_healing(partial(cluster.restart, node_id, timeout=NODE_TIMEOUT_SECONDS), heal)
        say(f"rolling restart: node {node_id} restarted and in sync")
    return round(time.monotonic() - started, 1)


def _acknowledged_after(bootstrap: str, marks: dict[Position, int], started: float, heal: Callable[[], None],
                        wait: float) -> dict[Position, float]:
    """Seconds from `started` until each partition's high watermark passed its mark (polled every 0.1 s).

    A new admin client for each poll: one that asked the killed leader before keeps asking it (librdkafka refreshes
    the metadata it caches only every few minutes), and would see no append until the node is back."""
    found: dict[Position, float] = {}
    while len(found) < len(marks) and time.monotonic() - started < wait:
        pending = [p for p in marks if p not in found]
        try:
            now = end_offsets(make_admin(bootstrap, log_level=0), pending, timeout=1.0)
        except LogError:
            now = {}
        found.update({p: time.monotonic() - started for p, offset in now.items() if offset > marks[p]})
        heal()
        time.sleep(0.1)
    return found


def _bring_back(cluster: LocalCluster, node_id: int) -> None:
    cluster.node(node_id).start(timeout=NODE_TIMEOUT_SECONDS)
    cluster.wait_for_brokers(NODE_TIMEOUT_SECONDS)
    cluster.wait_in_sync(NODE_TIMEOUT_SECONDS)

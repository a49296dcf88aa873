"""A store group's statistics total what each member owns: the view counts what every log partition created.

A member's view also holds partitions it owned before (stale after a hand-over), so its own totals are not the
group's; the counts per log partition let it total exactly the partitions it owns now (the broker test with a
group of 3 whose partitions moved is in `test_store_group`)."""

from __future__ import annotations

import dataclasses

from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.store.reads import PER_ROLLOUT, Reads
from agl_events.topics import Topic, partition_of
from agl_events.views.kv import DictKV
from agl_events.views.store_view import StoreView
from tests.reducers.workload import random_run

PER_ROLLOUT_TOPICS = {Topic.ROLLOUTS.value: 3, Topic.ATTEMPTS.value: 3, Topic.SPANS.value: 6}


def _spread(event: LoggedEvent) -> LoggedEvent:
    """The event in the partition of its topic that a log with `PER_ROLLOUT_TOPICS` partitions gives its key."""
    count = PER_ROLLOUT_TOPICS.get(event.topic)
    if count is None or event.key is None:
        return event
    return dataclasses.replace(event, partition=partition_of(event.key, count))


async def test_each_partitions_totals_add_up_to_the_views_and_refolding_keeps_them() -> None:
    run = await random_run(seed=3)
    view = StoreView(DictKV())
    view.apply_logged([_spread(e) for e in run.events])
    reads = Reads(view)
    totals = reads.counts()
    assert totals["spans"] and totals["attempts"] and totals["rollouts"]
    shares = [reads.counts_in(frozenset({q}), 3) for q in range(3)]
    assert {entity: sum(share[entity] for share in shares) for entity in PER_ROLLOUT} == {
        entity: totals[entity] for entity in PER_ROLLOUT}
    rollouts = [r for _, r in view.scan(keys.ROLLOUTS)]
    assert [share["rollouts"] for share in shares] == [
        sum(1 for r in rollouts if partition_of(r["rollout_id"], 3) == q) for q in range(3)]
    assert reads.counts_in(frozenset({0, 1, 2}), 3) == {entity: totals[entity] for entity in PER_ROLLOUT}

    counted = dict(view.scan(keys.PARTITION_COUNTS))
    view.apply_logged([_spread(e) for e in run.events])  # delivered again (a restart): skipped, counts kept
    again = StoreView(DictKV())
    for event in run.events:  # or folded one event at a time
        again.apply_logged([_spread(event)])
    assert dict(view.scan(keys.PARTITION_COUNTS)) == counted
    assert dict(again.scan(keys.PARTITION_COUNTS)) == counted

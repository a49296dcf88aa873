"""The pure parts of partition-local store groups: merging members' pages as one store pages, and which
partitions of each topic a member folds."""

from __future__ import annotations

import random

import pytest

from agl_events.store import queries as q
from agl_events.store.partition_folds import PartitionFolds
from agl_events.store.reads import rollout_base_order
from agl_events.topics import partition_of
from agl_events.types import Rollout

STATUSES = ["queuing", "running", "succeeded", "failed"]


def _rollouts(n: int, rng: random.Random) -> list[dict[str, object]]:
    return [{"rollout_id": f"ro-{rng.getrandbits(40):010x}", "input": i, "status": rng.choice(STATUSES),
             "start_time": float(rng.randint(0, 5)), "end_time": rng.choice([None, 9.0, 3.0]), "mode": None,
             "resources_id": None, "config": {}, "metadata": {}} for i in range(n)]


@pytest.mark.parametrize("seed", range(20))
def test_merged_pages_of_partition_shares_equal_one_stores_page(seed: int) -> None:
    rng = random.Random(seed)
    rollouts = sorted(_rollouts(40, rng), key=lambda r: r["rollout_id"])  # one store scans them by id
    sort_by = rng.choice([None, "status", "start_time", "end_time", "rollout_id"])
    order = rng.choice(["asc", "desc"])
    limit, offset = rng.choice([-1, 1, 5, 13]), rng.choice([0, 3, 17, 45])
    sort_by, order = (sort_by, order) if sort_by else ("start_time", "asc")
    expected, total = q.select(rollouts, Rollout, [], "and", [], sort_by, order, limit, offset)
    window = q.part_window(limit, offset)
    parts = [q.select([r for r in rollouts if partition_of(str(r["rollout_id"]), 3) == p], Rollout, [], "and", [],
                      sort_by, order, *window) for p in range(3)]
    assert sum(t for _, t in parts) == total
    merged = q.merge((page for page, _ in parts), Rollout, rollout_base_order(None, "and"), sort_by, order,
                     limit, offset)
    assert merged == expected


def test_ids_asked_for_keep_their_order_among_equals() -> None:
    base = rollout_base_order(["c", "a", "b", "a"], "and")
    assert sorted([{"rollout_id": "a"}, {"rollout_id": "b"}, {"rollout_id": "c"}], key=base) == [
        {"rollout_id": "c"}, {"rollout_id": "a"}, {"rollout_id": "b"}]


async def _nothing(_: object) -> None:
    return None


def test_a_member_folds_the_partitions_holding_its_rollouts_and_every_global_one() -> None:
    folds = PartitionFolds(3, {"agl.e.rollouts": 3, "agl.e.attempts": 3, "agl.e.spans": 6}, _nothing, _nothing)
    assert folds.positions({1}) == {("agl.e.rollouts", 1), ("agl.e.attempts", 1), ("agl.e.spans", 1),
                                    ("agl.e.spans", 4)}
    for rid in (f"ro-{i}" for i in range(50)):  # the spans partition of a rollout is among its owner's
        assert ("agl.e.spans", partition_of(rid, 6)) in folds.positions({partition_of(rid, 3)})
    assert folds.is_global(("agl.e.resources", 0)) and not folds.is_global(("agl.e.spans", 5))
    with pytest.raises(ValueError, match="multiple"):
        PartitionFolds(3, {"agl.e.spans": 4}, _nothing, _nothing)

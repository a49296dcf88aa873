"""Several `agl-events store` processes sharing one experiment by partition ownership, on the real broker.

Each decides for the rollouts of the rollouts-topic partitions the store group gave it and forwards the rest;
any server answers every route, a caller reads its own writes on the server it wrote through, and a killed
store's partitions move to the others without losing or doubling anything.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from agl_events.config import Settings
from agl_events.server.client import StoreClient
from agl_events.server.process import StoreProcess
from agl_events.topics import partition_of
from tests.eventually import eventually

pytestmark = pytest.mark.kafka

PARTITIONS = 3  # the rollouts topic's, from the layout


def _group(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/v1/agl/statistics", timeout=10).json()["store_group"]


def _settled(stores: list[StoreProcess], timeout: float = 60.0) -> dict[str, set[int]]:
    """Wait until every partition is owned by exactly one of `stores`, each owning at least one, and every store
    knows it (the owners it tells runner clients: partitions move one member at a time)."""
    def owned() -> tuple[dict[str, set[int]], list[dict[str, Any]]]:
        groups = [_group(s.url) for s in stores]
        return {s.url: set(group["owned"]) for s, group in zip(stores, groups, strict=True)}, groups

    def settled(answer: tuple[dict[str, set[int]], list[dict[str, Any]]]) -> bool:
        by_store, groups = answer
        owners = {str(p): url for url, ps in by_store.items() for p in ps}
        return sorted(p for ps in by_store.values() for p in ps) == list(range(PARTITIONS)) and all(
            by_store.values()) and all(group["owners"] == owners for group in groups)

    return eventually(owned, "the store group settled", within=timeout, until=settled)[0]


def _post(url: str, path: str, body: Any = None) -> Any:
    response = httpx.post(f"{url}/v1/agl{path}", json=body, timeout=90)
    assert response.status_code < 300, response.text
    return response.json()


def _finish(url: str, rollout: dict[str, Any], other: str) -> None:
    """A span through `other`, the attempt's end through `url`, then `url` reads its own write."""
    rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
    seq = _post(other, "/spans/next", {"rollout_id": rid, "attempt_id": aid})["sequence_id"]
    _post(other, "/spans", {"rollout_id": rid, "attempt_id": aid, "sequence_id": seq, "trace_id": "t" * 32,
                            "span_id": f"{seq:016x}", "parent_id": None, "name": "work", "status":
                            {"status_code": "OK"}, "attributes": {}, "events": [], "links": [],
                            "start_time": 1.0, "end_time": 2.0, "context": None, "parent": None,
                            "resource": {"attributes": {}, "schema_url": ""}})
    _post(url, f"/rollouts/{rid}/attempts/{aid}", {"status": "succeeded"})
    got = httpx.get(f"{url}/v1/agl/rollouts/{rid}", timeout=10).json()
    assert got["status"] == "succeeded", got


def _check_all_succeeded_once(url: str, ids: set[str]) -> None:
    rollouts = httpx.get(f"{url}/v1/agl/rollouts", timeout=30).json()["items"]
    assert {r["rollout_id"] for r in rollouts} == ids
    assert {r["status"] for r in rollouts} == {"succeeded"}
    for rid in ids:
        attempts = httpx.get(f"{url}/v1/agl/rollouts/{rid}/attempts", timeout=10).json()["items"]
        assert len(attempts) == 1, attempts  # dequeued exactly once, never twice by two owners
        spans = httpx.get(f"{url}/v1/agl/spans", params={"rollout_id": rid}, timeout=10).json()["items"]
        assert [s["sequence_id"] for s in spans] == [1]


@pytest.fixture
def stores(settings: Settings, tmp_path: Path) -> Any:
    started: list[StoreProcess] = []

    def start(n: int) -> list[StoreProcess]:
        for _ in range(n):
            store = StoreProcess(settings, tmp_path / f"views-{len(started)}", tmp_path / f"store-{len(started)}.log")
            store.start()
            started.append(store)
        return started[-n:]

    yield start
    for store in started:
        store.kill9()


def test_two_stores_split_the_partitions_and_answer_every_route(stores: Any) -> None:
    a, b = stores(2)
    owned = _settled([a, b])
    created = {a.url: [r["rollout_id"] for r in _post(a.url, "/queues/rollouts/enqueue",
                                                      {"rollouts": [{"input": i} for i in range(15)]})],
               b.url: [r["rollout_id"] for r in _post(b.url, "/queues/rollouts/enqueue",
                                                      {"rollouts": [{"input": i} for i in range(15, 30)]})]}
    for url, ids in created.items():  # a store creates rollouts where it decides
        assert {partition_of(rid, PARTITIONS) for rid in ids} <= owned[url]
    # Each server dequeues its own rollouts first, then asks the other: 30 dequeued exactly once in all.
    dequeued = _post(b.url, "/queues/rollouts/dequeue", {"limit": 20, "worker_id": "w1"})
    dequeued += _post(a.url, "/queues/rollouts/dequeue", {"limit": 20, "worker_id": "w2"})
    assert sorted(r["rollout_id"] for r in dequeued) == sorted(created[a.url] + created[b.url])
    assert _post(a.url, "/queues/rollouts/dequeue", {"limit": 5}) == []
    for i, rollout in enumerate(dequeued):  # spans and ends through either server, whoever owns the rollout
        first, second = (a.url, b.url) if i % 2 else (b.url, a.url)
        _finish(first, rollout, second)
    for store in (a, b):
        _check_all_succeeded_once(store.url, set(created[a.url] + created[b.url]))


def test_a_killed_store_hands_its_partitions_on_and_nothing_is_lost_or_doubled(stores: Any) -> None:
    a, b = stores(2)
    _settled([a, b])
    ids = {r["rollout_id"] for url in (a.url, b.url) for r in _post(
        url, "/queues/rollouts/enqueue", {"rollouts": [{"input": i} for i in range(20)]})}
    running = _post(a.url, "/queues/rollouts/dequeue", {"limit": 15, "worker_id": "w1"})
    a.kill9()  # SIGKILL: its partitions move to b once the group's session times out
    assert set(_group(b.url)["owned"]) != set(range(PARTITIONS))
    rng = random.Random(7)
    rng.shuffle(running)
    for rollout in running:  # attempts a started: b ends them once it owns their partitions
        _finish(b.url, rollout, b.url)
    assert _settled([b])[b.url] == set(range(PARTITIONS))
    rest = _post(b.url, "/queues/rollouts/dequeue", {"limit": 100, "worker_id": "w2"})
    assert len(running) + len(rest) == len(ids)
    for rollout in rest:
        _finish(b.url, rollout, b.url)
    _check_all_succeeded_once(b.url, ids)
    a.start()  # back: it takes partitions again after catching up, and reads the same
    _settled([a, b])
    _check_all_succeeded_once(a.url, ids)


def test_a_runner_client_sends_each_rollout_to_the_store_owning_it(stores: Any) -> None:
    a, b = stores(2)
    owned = _settled([a, b])
    ids = [r["rollout_id"] for url in (a.url, b.url)
           for r in _post(url, "/queues/rollouts/enqueue", {"rollouts": [{"input": i} for i in range(6)]})]

    async def run() -> tuple[dict[str | None, list[str]], list[Any]]:
        client = StoreClient(a.url)
        sent: dict[str | None, list[str]] = {}

        async def record(at: str | None, indices: list[int]) -> list[int]:
            sent[at] = [ids[i] for i in indices]
            return indices

        try:
            assert await client._at_owners(ids, record) == list(range(len(ids)))  # answers in the callers' order
            return sent, await client.claim_many(ids, "w1")
        finally:
            await client.close()

    sent, claims = asyncio.run(run())
    assert set(sent) == {a.url, b.url}  # no share left to the store the client was given
    for url, rids in sent.items():
        assert {partition_of(rid, PARTITIONS) for rid in rids} <= owned[url]
    assert [c.rollout.rollout_id if c else None for c in claims] == ids


#: Queries over all rollouts that a store group answers by fanning out: sorting (ties across partitions too),
#: pagination, filters, ids given in an order of their own.
FANNED_OUT = [
    {},
    {"sort_by": "rollout_id", "sort_order": "desc", "limit": 5, "offset": 3},
    {"sort_by": "status", "limit": 7},
    {"sort_by": "status", "sort_order": "desc", "limit": 6, "offset": 9},
    {"status_in": ["queuing"], "sort_by": "start_time", "sort_order": "desc", "limit": 4, "offset": 2},
    {"status_in": ["succeeded", "running"], "filter_logic": "or", "rollout_id_contains": "zz", "offset": 4},
    {"rollout_id_contains": "a", "limit": 2},
    {"limit": -1, "offset": 10},
    {"offset": 40},
]


def _search(url: str, body: dict[str, Any]) -> Any:
    return _post(url, "/rollouts/search", body)


def test_three_stores_answer_reads_as_one_store_does(stores: Any, settings: Settings, tmp_path: Path) -> None:
    """Reads about one rollout (its owner answers), queries over all rollouts (every member answers for its
    partitions, merged) and the statistics' totals through each store of a group of 3 equal a single store's
    answers on the same log, after partitions moved from the first two stores to the third (the two keep
    their state, stale)."""
    group = stores(2)
    _settled(group)
    ids = [r["rollout_id"] for i, store in enumerate(group) for r in _post(
        store.url, "/queues/rollouts/enqueue", {"rollouts": [{"input": 10 * i + j} for j in range(10)]})]
    running = _post(group[0].url, "/queues/rollouts/dequeue", {"limit": 4, "worker_id": "w1"})
    group += stores(1)
    _settled(group)
    ids += [r["rollout_id"] for r in _post(group[2].url, "/queues/rollouts/enqueue",
                                           {"rollouts": [{"input": 20 + j} for j in range(10)]})]
    running += _post(group[1].url, "/queues/rollouts/dequeue", {"limit": 10, "worker_id": "w1"})
    for i, rollout in enumerate(running[:8]):
        _finish(group[i % 3].url, rollout, group[(i + 1) % 3].url)
    single = StoreProcess(settings, tmp_path / "single", tmp_path / "single.log", "--read-only",
                          "--as-of", "4000000000")
    single.start()  # a view of the whole log, rebuilt now: what one store answers
    try:
        chosen = [ids[i] for i in (17, 3, 25, 8, 11, 29, 0)]
        queries = [*FANNED_OUT, {"rollout_id_in": chosen}, {"rollout_id_in": chosen, "sort_by": "status"},
                   {"rollout_id_in": chosen[:3], "status_in": ["queuing"], "filter_logic": "or"}]
        for query in queries:
            expected = _search(single.url, query)
            for store in group:
                assert _search(store.url, query) == expected, (store.url, query)
        for rid in chosen:
            paths = [f"/rollouts/{rid}", f"/rollouts/{rid}/attempts", f"/rollouts/{rid}/attempts/latest",
                     f"/spans?rollout_id={rid}"]
            for path in paths:
                expected = httpx.get(f"{single.base}{path}", timeout=30).json()
                for store in group:
                    assert httpx.get(f"{store.base}{path}", timeout=30).json() == expected, (store.url, path)
        expected = _totals(single.url)
        assert (expected["total_rollouts"], expected["total_spans"]) == (30, 8)
        for store in group:
            assert _totals(store.url) == expected, store.url
            assert _group(store.url)["uncounted"] == []
    finally:
        single.kill9()


def _totals(url: str) -> dict[str, int]:
    stats = httpx.get(f"{url}/v1/agl/statistics", timeout=10).json()
    return {key: value for key, value in stats.items() if key.startswith("total_")}


def test_three_stores_fold_their_own_partitions_and_a_killed_owners_move_whole(stores: Any) -> None:
    """Each store of a group folds only the rollouts of its partitions; a killed owner's partitions move to a
    survivor, which folds them from the log before deciding: nothing lost or doubled, every read right."""
    group = stores(3)
    owned = _settled(group)
    ids = {r["rollout_id"] for store in group for r in _post(
        store.url, "/queues/rollouts/enqueue", {"rollouts": [{"input": i} for i in range(10)]})}
    for store in group:  # its view holds its share only; its statistics total the group's
        share = sum(1 for rid in ids if partition_of(rid, PARTITIONS) in owned[store.url])
        assert _group(store.url)["folded"]["rollouts"] == share
        assert _totals(store.url)["total_rollouts"] == len(ids)
    running = _post(group[0].url, "/queues/rollouts/dequeue", {"limit": 20, "worker_id": "w1"})
    for i, rollout in enumerate(running[:10]):
        _finish(group[i % 3].url, rollout, group[(i + 1) % 3].url)
    group[1].kill9()  # mid-run: its partitions move once the group's session times out
    survivors = [group[0], group[2]]
    for i, rollout in enumerate(running[10:]):  # ends of attempts the dead store owned wait for the move
        _finish(survivors[i % 2].url, rollout, survivors[(i + 1) % 2].url)
    _settled(survivors)
    rest = _post(group[2].url, "/queues/rollouts/dequeue", {"limit": 100, "worker_id": "w2"})
    assert len(running) + len(rest) == len(ids)
    for rollout in rest:
        _finish(group[0].url, rollout, group[2].url)
    for store in survivors:
        _check_all_succeeded_once(store.url, ids)

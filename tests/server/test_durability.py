"""Kill -9 the store server mid-workload: everything acknowledged is there after restart, exactly once."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from agl_events.config import Settings
from agl_events.server.process import StoreProcess

pytestmark = pytest.mark.kafka


def _span(rid: str, aid: str, seq: int) -> dict:
    return {"rollout_id": rid, "attempt_id": aid, "sequence_id": seq, "trace_id": uuid.uuid4().hex,
            "span_id": uuid.uuid4().hex[:16], "parent_id": None, "name": "step",
            "status": {"status_code": "OK", "description": None}, "attributes": {"i": seq}, "events": [],
            "links": [], "start_time": 1.0, "end_time": 2.0, "context": None, "parent": None,
            "resource": {"attributes": {}, "schema_url": ""}}


class Ledger:
    """What the server acknowledged (2xx with a body), and nothing else."""

    def __init__(self) -> None:
        self.rollouts: set[str] = set()
        self.attempts: dict[str, set[str]] = {}
        self.spans: dict[str, set[str]] = {}
        self.succeeded: set[str] = set()


def _one_rollout(client: httpx.Client, base: str, ledger: Ledger) -> None:
    """Enqueue, dequeue, three spans, success; each step recorded only once acknowledged."""
    r = client.post(f"{base}/queues/rollouts/enqueue", json={"rollouts": [{"input": {"q": 1}}]})
    r.raise_for_status()
    rid = r.json()[0]["rollout_id"]
    ledger.rollouts.add(rid)
    d = client.post(f"{base}/queues/rollouts/dequeue", json={"limit": 1, "worker_id": "w1"})
    d.raise_for_status()
    for claimed in d.json():  # may be an older rollout left queued by a kill: finish it too
        crid, aid = claimed["rollout_id"], claimed["attempt"]["attempt_id"]
        ledger.attempts.setdefault(crid, set()).add(aid)
        for _ in range(3):
            seq = client.post(f"{base}/spans/next", json={"rollout_id": crid, "attempt_id": aid})
            seq.raise_for_status()
            span = _span(crid, aid, seq.json()["sequence_id"])
            added = client.post(f"{base}/spans", json=span)
            added.raise_for_status()
            ledger.spans.setdefault(crid, set()).add(span["span_id"])
        done = client.post(f"{base}/rollouts/{crid}/attempts/{aid}", json={"status": "succeeded"})
        done.raise_for_status()
        ledger.succeeded.add(crid)


def _workload(server: StoreProcess, ledger: Ledger, seconds: float) -> int:
    """Run rollouts for `seconds`, riding through kills (failed steps are simply not acknowledged)."""
    failures = 0
    end = time.monotonic() + seconds
    with httpx.Client(timeout=10) as client:
        while time.monotonic() < end:
            try:
                _one_rollout(client, server.base, ledger)
            except httpx.HTTPError:
                failures += 1
                time.sleep(0.2)
    return failures


def test_kill9_mid_workload_loses_nothing_acknowledged(settings: Settings, tmp_path: Path) -> None:
    server = StoreProcess(settings, tmp_path / "views", tmp_path / "server.log")
    ledger = Ledger()
    server.start()
    try:
        killer = threading.Timer(2.0, server.kill9)
        killer.start()
        failures = _workload(server, ledger, seconds=3.0)  # killed after 2 s, the last second fails
        killer.join()
        server.start(wait=False)
        time.sleep(0.5)
        server.kill9()  # killed again, possibly while catching up
        server.start()
        _workload(server, ledger, seconds=2.0)
        server.kill9()
        server.start()
        assert failures > 0, "the kill must have interrupted the workload"
        assert len(ledger.succeeded) > 10
        _check_ledger(server, ledger)
    finally:
        server.stop()


def _check_ledger(server: StoreProcess, ledger: Ledger) -> None:
    with httpx.Client(timeout=10) as client:
        base = server.base
        for rid in ledger.rollouts:
            rollout = client.get(f"{base}/rollouts/{rid}").json()
            assert rollout is not None and rollout["rollout_id"] == rid
            if rid in ledger.succeeded:
                assert rollout["status"] == "succeeded"
        for rid, attempt_ids in ledger.attempts.items():
            attempts = client.get(f"{base}/rollouts/{rid}/attempts").json()["items"]
            got = [a["attempt_id"] for a in attempts]
            assert len(got) == len(set(got)), f"attempt twice in {rid}"
            assert attempt_ids <= set(got)
            assert [a["sequence_id"] for a in attempts] == list(range(1, len(attempts) + 1))
        for rid, span_ids in ledger.spans.items():
            spans = client.get(f"{base}/spans", params={"rollout_id": rid}).json()["items"]
            got = [s["span_id"] for s in spans]
            assert len(got) == len(set(got)), f"span twice in {rid}"
            assert span_ids <= set(got)
            seqs = [s["sequence_id"] for s in spans]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        stats = client.get(f"{base}/statistics").json()
        every = [r["rollout_id"] for r in client.get(f"{base}/rollouts").json()["items"]]
        assert stats["total_rollouts"] == len(every) >= len(ledger.rollouts)
        spans_in_view = sum(client.get(f"{base}/spans", params={"rollout_id": rid}).json()["total"] for rid in every)
        assert stats["total_spans"] == spans_in_view >= sum(len(ids) for ids in ledger.spans.values())

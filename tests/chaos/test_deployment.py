"""A chaos run on a store group, without running one: the deployment's processes (N stores in one group, runners
spread over them) and the workload's enqueues spread over the members, a refusing member skipped."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agl_events.chaos.deployment import Deployment
from agl_events.chaos.run import ChaosConfig, enqueue
from agl_events.config import Settings
from agl_events.supervise.plan import Kind


def _deployment(tmp_path: Path, **stores: int) -> Deployment:
    settings = Settings(home=tmp_path, experiment="chaos", bootstrap="127.0.0.1:1")  # nothing is started
    return Deployment(settings, 4, say=lambda _: None, **stores)


def _flag(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_three_stores_form_one_group_and_the_runners_spread_over_them(tmp_path: Path) -> None:
    deployment = _deployment(tmp_path, stores=3)
    plan = deployment.supervisor.plan
    stores = plan.of_kind(Kind.STORE)
    assert [s.name for s in stores] == ["store-0", "store-1", "store-2"]
    assert deployment.store_urls == [s.url for s in stores] and len(set(deployment.store_urls)) == 3
    assert [_flag(s.args, "--advertise-url") for s in stores] == deployment.store_urls  # they find each other
    assert "--single" not in [arg for s in stores for arg in s.args]
    assert len({_flag(s.args, "--views") for s in stores}) == 3
    runners = [_flag(r.args, "--store-url") for r in plan.of_kind(Kind.RUNNER)]
    assert runners == [deployment.store_urls[i % 3] for i in range(4)]
    assert len(plan.of_kind(Kind.PROCESSOR)) == 1


def test_by_default_one_store_serves_the_run(tmp_path: Path) -> None:
    deployment = _deployment(tmp_path)
    assert len(deployment.store_urls) == 1
    assert {_flag(r.args, "--store-url") for r in deployment.supervisor.plan.of_kind(Kind.RUNNER)} == \
        set(deployment.store_urls)
    assert ChaosConfig(home=tmp_path).stores == 1


class _FakeStore(ThreadingHTTPServer):
    """An enqueue route on loopback: acknowledges each batch with ids naming this store, or refuses (503)."""

    def __init__(self, name: str, refuses: bool) -> None:
        self.name, self.refuses, self.batches = name, refuses, list[list[int]]()
        super().__init__(("127.0.0.1", 0), _EnqueueHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _EnqueueHandler(BaseHTTPRequestHandler):
    server: _FakeStore

    def do_POST(self) -> None:
        batch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["rollouts"]
        if self.server.refuses:
            self.send_response(503)
            self.end_headers()
            return
        self.server.batches.append([r["input"]["i"] for r in batch])
        body = json.dumps([{"rollout_id": f"{self.server.name}-{r['input']['i']}"} for r in batch]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def fake_stores() -> Iterator[list[_FakeStore]]:
    stores = [_FakeStore("s0", False), _FakeStore("s1", True), _FakeStore("s2", False)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in stores]
    for thread in threads:
        thread.start()
    yield stores
    for store in stores:
        store.shutdown()
        store.server_close()


def test_enqueue_spreads_batches_over_the_members_and_skips_one_that_refuses(tmp_path: Path,
                                                                             fake_stores: list[_FakeStore]) -> None:
    into: list[str] = []
    enqueue([s.url for s in fake_stores], ChaosConfig(home=tmp_path), range(0, 300), into)
    s0, s1, s2 = fake_stores
    # batch k of 50 goes to store k mod 3; store 1 refuses, so its batches go to the next one, store 2
    assert [b[0] for b in s0.batches] == [0, 150] and [b[0] for b in s2.batches] == [50, 100, 200, 250]
    assert s1.batches == []
    assert sorted(int(rid.split("-")[1]) for rid in into) == list(range(300))  # each acknowledged once
    assert into[:3] == ["s0-0", "s0-1", "s0-2"] and into[50] == "s2-50"

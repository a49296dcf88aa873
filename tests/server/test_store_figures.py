"""The store server's figures on a real broker: `/ui/data.json` and `/metrics` after a known workload."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agl_events.config import Settings
from agl_events.server.embedded import serving
from agl_events.store.kafka import KafkaLightningStore
from tests.conftest import FakeClock
from tests.eventually import eventually_async
from tests.server.known_workload import (
    DISPATCH_SECONDS,
    FAILED,
    QUEUED,
    RUN_SECONDS,
    SUCCEEDED,
    run_known_workload,
)

pytestmark = pytest.mark.kafka


@pytest.fixture
async def served(settings: Settings, tmp_path: Path, clock: FakeClock
                 ) -> AsyncIterator[tuple[KafkaLightningStore, str]]:
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", scan_debounce_seconds=3600,
                                           clock=clock)
    async with serving(store, settings.experiment) as url:
        yield store, url.split("/experiments/")[0]


async def test_figures_after_a_known_workload(served: tuple[KafkaLightningStore, str], clock: FakeClock,
                                              settings: Settings) -> None:
    store, url = served
    await run_known_workload(store, clock)
    exp = ("experiment", settings.experiment)
    read: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        async def folded() -> bool:
            """Every figure asserted below that the follower observes as it folds: dispatch latencies come
            from AttemptCreated (attempts topic), the curve, rewards and finish latencies from RolloutFinished,
            so waiting for one (the curve) says nothing of the other; the lag read from cached log ends can be
            0 before a partition's last records are fetched. Asserted on the readings that passed."""
            read["data"] = data = (await http.get("/ui/data.json")).json()
            read["samples"] = samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for family in
                                         text_string_to_metric_families((await http.get("/metrics")).text)
                                         for s in family.samples}
            applied = data["events_applied"]
            return (applied.get("AttemptCreated") == applied.get("RolloutFinished") == SUCCEEDED + FAILED
                    and applied.get("SpanAdded") == SUCCEEDED
                    and samples.get(("agl_store_dispatch_latency_seconds_count", (exp,))) == SUCCEEDED + FAILED
                    and sum(p["rollouts"] for p in data["reward_curve"]) == SUCCEEDED
                    and not any(data["consumer_lag"].values()))

        await eventually_async(folded, "the follower folded the workload")
    data, samples = read["data"], read["samples"]

    assert data["experiment"] == settings.experiment and data["healthy"]
    assert data["rollouts_by_status"] == {"succeeded": SUCCEEDED, "failed": FAILED, "queuing": QUEUED}
    assert [(p["generation"], round(p["mean_reward"], 6), p["rollouts"]) for p in data["reward_curve"]] == [
        (1, 0.2, 3), (2, 0.8, 3)]
    assert data["resources_versions"] == 2 and data["latest_resources_id"] is not None
    assert data["events_applied"]["SpanAdded"] == SUCCEEDED and data["events_applied"]["RolloutFinished"] == 8
    assert data["dead_letters"] == 0 and data["view_bytes"] > 0 and data["trainer_step"] is None

    assert samples[("agl_store_rollouts", (exp, ("status", "succeeded")))] == SUCCEEDED
    assert samples[("agl_store_events_applied_total", (exp, ("kind", "SpanAdded"), ("topic", "spans")))] == SUCCEEDED
    assert samples[("agl_store_dispatch_latency_seconds_count", (exp,))] == SUCCEEDED + FAILED
    assert samples[("agl_store_dispatch_latency_seconds_sum", (exp,))] == pytest.approx(
        (SUCCEEDED + FAILED) * DISPATCH_SECONDS, abs=1e-3)
    finish = DISPATCH_SECONDS + RUN_SECONDS
    assert samples[("agl_store_finish_latency_seconds_sum", (exp, ("status", "failed")))] == pytest.approx(
        FAILED * finish, abs=1e-3)
    assert samples[("agl_store_rollout_reward_sum", (exp,))] == pytest.approx(3 * 0.2 + 3 * 0.8)
    assert samples[("agl_store_resources_versions", (exp,))] == 2
    assert samples[("agl_store_dead_letters_total", (exp,))] == 0
    lags = [v for (name, _), v in samples.items() if name == "agl_store_consumer_lag"]
    assert lags and not any(lags)

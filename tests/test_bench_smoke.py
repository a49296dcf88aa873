"""Pure parts of the side-by-side benchmark: the workload's shape and the JSON summary (no broker, no timing)."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agl_events.bench.agl_side import random_attributes, run_plan
from agl_events.bench.compare import REQUIRED_KEYS, summarize
from agl_events.bench.workload import PRESETS, WorkloadParams, expected_spans, plan_rollout
from agl_events.emitter import emit_reward, operation, set_active_provider


def _leaf_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaf_strings(v)]
    return [value]


def test_plan_is_deterministic_and_bounded() -> None:
    for seed in range(50):
        plan = plan_rollout(seed, max_rounds=4)
        assert plan == plan_rollout(seed, max_rounds=4)
        assert 1 <= len(plan["rounds"]) <= 4
        for rnd in plan["rounds"]:
            assert len(rnd["children"]) == 2
            for attrs in (rnd["attributes"], *rnd["children"]):
                assert all(isinstance(s, str) and 5 <= len(s) <= 300 for s in _leaf_strings(attrs))
        assert expected_spans(plan) == sum(3 + (r["reward"] is not None) for r in plan["rounds"]) + 2


def test_random_attributes_nest() -> None:
    import random

    rng = random.Random(1)
    assert any(isinstance(v, dict) for _ in range(20) for v in random_attributes(rng).values())


def test_run_plan_emits_the_planned_spans() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = set_active_provider(provider)
    try:
        task = WorkloadParams(rollouts=1, max_rounds=5, seed=3).tasks()[0]
        run_plan(task, operation, emit_reward)
    finally:
        set_active_provider(previous)
    plan = plan_rollout(int(task["seed"]), 5)
    # The runner adds the final reward from the returned float, hence - 1 here.
    assert len(exporter.get_finished_spans()) == expected_spans(plan) - 1


def test_presets_and_agl_args_carry_every_parameter() -> None:
    assert set(PRESETS) >= {"small", "medium"}
    args = PRESETS["medium"].agl_side_args()
    for name in WorkloadParams.model_fields:
        assert f"--{name.replace('_', '-')}" in args


def test_summary_has_the_contract_keys_and_is_json() -> None:
    params = WorkloadParams(rollouts=2, runners=1, max_rounds=1)
    ours = {"rollouts": 2, "spans": 20, "seconds": 1.0, "dispatch_p50_ms": 5.0, "dispatch_p99_ms": 9.0,
            "store_rss_mb_peak": 100.0, "runner_rss_mb_peak": 80.0}
    agl = {"rollouts": 2, "spans": 20, "seconds": 2.0, "dispatch_p50_ms": 7.0, "dispatch_p99_ms": 11.0}
    summary = summarize(params, ours, agl, {"raw_produce_per_s": 200.0})
    assert set(REQUIRED_KEYS) <= set(summary)
    assert summary["ratio_rollouts"] == 2.0 and summary["ratio_spans"] == 2.0
    assert summary["ingest_fraction_of_raw"] == 0.1
    assert json.loads(json.dumps(summary)) == summary

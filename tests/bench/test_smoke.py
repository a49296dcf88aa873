"""Pure parts of the side-by-side benchmark: the workload's shape, the JSON summary, stage costs and CPU
accounting (no broker, no timing assertions)."""

from __future__ import annotations

import json
import os
import re
import string
import threading
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agl_events.bench.agl_side import random_attributes, run_plan
from agl_events.bench.broker_warm_up import compiling_share, is_warm
from agl_events.bench.compare import REQUIRED_KEYS, summarize
from agl_events.bench.cpu import JIT_THREADS, CpuMeter, process_cpu_seconds, thread_cpu_seconds
from agl_events.bench.round_trips import metrics_url, per_rollout, requests_by_route
from agl_events.bench.stages import stage_costs
from agl_events.bench.workload import OURS_ONLY, PRESETS, WorkloadParams, expected_spans, plan_rollout
from agl_events.emitter import emit_reward, operation, set_active_provider

#: What a workload string may hold: letters, digits and spaces, as a prompt or a tool argument might.
ALPHABET = set(string.ascii_letters + string.digits + " ")


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
                assert all(isinstance(s, str) and 5 <= len(s) <= 300 and set(s) <= ALPHABET
                           for s in _leaf_strings(attrs))
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
    assert set(PRESETS) >= {"small", "medium", "agl-minimal", "agl-heavy-traces"}
    args = PRESETS["medium"].agl_side_args()
    for name in WorkloadParams.model_fields:
        assert (f"--{name.replace('_', '-')}" in args) != (name in OURS_ONLY)


def test_agl_presets_give_our_side_as_many_slots_as_agl_has_runners() -> None:
    for name, params in PRESETS.items():
        if name.startswith("agl-"):
            assert params.our_processes() * params.concurrency == params.runners, name


def test_scaled_agl_presets_keep_the_shape_and_give_our_side_as_many_slots() -> None:
    published = PRESETS["agl-midhigh"]
    here = published.scaled(37.5)
    assert (here.rollouts, here.runners, here.batch_size) == (533, 8, 55)
    assert (here.max_rounds, here.span_sleep, here.reward_p) == (published.max_rounds, published.span_sleep,
                                                                 published.reward_p)
    assert (here.our_processes(), here.concurrency) == (1, 8)
    for name, params in PRESETS.items():  # unscaled, nothing changes (medium: 4 processes of 16 slots each)
        same = params.scaled(1)
        assert (same.rollouts, same.runners, same.batch_size, same.our_processes(), same.concurrency) == (
            params.rollouts, params.runners, params.batch_size, params.our_processes(), params.concurrency), name
        for factor in (1, 4, 64, 10_000):
            scaled = params.scaled(factor)
            assert scaled.runners >= 1 and scaled.batch_size >= 1 and scaled.rollouts >= 1, (name, factor)
            assert scaled.our_processes() * scaled.concurrency >= scaled.runners, (name, factor)
            assert scaled.concurrency <= max(params.concurrency, 1) or scaled.our_processes() == 1, (name, factor)


def test_round_trips_per_rollout_come_from_the_servers_request_counter() -> None:
    def scrape(claims: int, finishes: int, scrapes: int) -> str:
        line = 'agl_http_requests_total{{method="{m}",route="{r}",status="{s}"}} {n}.0\n'
        return ("# TYPE agl_http_requests counter\n"
                + line.format(m="POST", r="/experiments/{experiment}/v1/agl/claims", s="200", n=claims)
                + line.format(m="POST", r="/experiments/{experiment}/v1/agl/claims", s="503", n=1)
                + line.format(m="POST", r="/experiments/{experiment}/v1/agl/attempts/finish", s="200", n=finishes)
                + line.format(m="GET", r="/metrics", s="200", n=scrapes))

    before, after = requests_by_route(scrape(3, 0, 1)), requests_by_route(scrape(13, 5, 2))
    assert before["POST /experiments/{experiment}/v1/agl/claims"] == 4  # every status counts
    assert per_rollout(before, after, rollouts=20) == {"POST /experiments/{experiment}/v1/agl/claims": 0.5,
                                                      "POST /experiments/{experiment}/v1/agl/attempts/finish": 0.25}
    assert metrics_url("http://127.0.0.1:4747/experiments/e1?x=1") == "http://127.0.0.1:4747/metrics"


def test_summary_has_the_contract_keys_and_is_json() -> None:
    params = WorkloadParams(rollouts=2, runners=1, max_rounds=1)
    ours = {"rollouts": 2, "spans": 20, "seconds": 1.0, "dispatch_p50_ms": 5.0, "dispatch_p99_ms": 9.0,
            "finish_p50_ms": 20.0, "finish_p99_ms": 30.0, "store_rss_mb_peak": 100.0, "runner_rss_mb_peak": 80.0,
            "cpu_seconds": {"store": 0.5, "runners": 1.0, "broker": 0.5, "wall": 1.0, "cores": 2.0},
            "http_calls_per_rollout": 0.5, "http_calls_per_rollout_by_route": {"POST /v1/agl/claims": 0.5}}
    agl = {"rollouts": 2, "spans": 20, "seconds": 2.0, "dispatch_p50_ms": 7.0, "dispatch_p99_ms": 11.0,
           "finish_p50_ms": 40.0, "finish_p99_ms": 60.0}
    summary = summarize(params, ours, agl, {"raw_produce_per_s": 200.0})
    assert set(REQUIRED_KEYS) <= set(summary)
    assert summary["ratio_rollouts"] == 2.0 and summary["ratio_spans"] == 2.0
    assert summary["ingest_fraction_of_raw"] == 0.1
    assert summary["cpu_runners_s"] == 1.0 and summary["cpu_busy_fraction"] == 1.0
    assert (summary["cpu_ms_per_rollout_runners"], summary["cpu_ms_per_rollout_store"]) == (500.0, 250.0)
    assert (summary["finish_p50_ms"], summary["agl_finish_p99_ms"]) == (20.0, 60.0)
    assert summary["http_calls_per_rollout_by_route"] == {"POST /v1/agl/claims": 0.5}
    assert json.loads(json.dumps(summary)) == summary


def test_stage_costs_cover_every_span_of_the_workload() -> None:
    params = WorkloadParams(rollouts=5, max_rounds=3, seed=1)
    figures = stage_costs(params.tasks())
    # The runner's final reward is recorded from the returned float, as `record_otel_spans` does too.
    assert figures["stage_spans"] == params.expected_spans()
    assert all(figures[f"stage_{name}_us"] > 0 for name in ("write", "convert", "encode", "decode", "fold"))
    assert figures["stage_one_core_spans_per_s"] > 0


def test_cpu_meter_counts_this_process_and_skips_missing_ones() -> None:
    meter = CpuMeter({"me": [os.getpid()], "gone": [2**22 + 12345]})  # above pid_max: never a process
    meter.start()
    deadline = process_cpu_seconds(os.getpid())
    assert deadline is not None
    while (process_cpu_seconds(os.getpid()) or 0.0) < deadline + 0.05:  # burn 50 ms of CPU
        sum(range(10_000))
    used = meter.stop()
    assert used["me"] >= 0.049 and "gone" not in used and used["wall"] > 0


def test_thread_cpu_seconds_counts_only_the_threads_named() -> None:
    named = re.compile(re.escape(Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()))
    start, process_start = thread_cpu_seconds(os.getpid(), named), process_cpu_seconds(os.getpid())
    assert start is not None and process_start is not None
    while (process_cpu_seconds(os.getpid()) or 0.0) < process_start + 0.05:  # burn 50 ms in this thread
        sum(range(10_000))
    assert (thread_cpu_seconds(os.getpid(), named) or 0.0) >= start + 0.03
    assert thread_cpu_seconds(os.getpid(), re.compile("no thread is called this")) == 0.0
    assert thread_cpu_seconds(2**22 + 12345, JIT_THREADS) is None  # above pid_max: never a process


def test_jit_threads_are_the_jvms_compilers_as_proc_names_them() -> None:
    assert JIT_THREADS.match("C2 CompilerThre") and JIT_THREADS.match("C1 CompilerThre")
    assert not JIT_THREADS.match("data-plane-kafk") and not JIT_THREADS.match("GC Thread#0")


def test_compiling_share_of_a_stretch() -> None:
    assert compiling_share(0.33, 1.0) == 0.33
    assert compiling_share(0.0, 0.0) == 0.0  # an idle stretch is not a cold broker


def test_a_broker_is_warm_after_two_quiet_rounds_in_a_row() -> None:
    assert not is_warm([]) and not is_warm([0.05])
    assert not is_warm([0.49, 0.33, 0.09])  # one quiet round after loud ones: a lull between bursts
    assert not is_warm([0.09, 0.34])
    assert is_warm([0.54, 0.09, 0.08]) and is_warm([0.0, 0.0])

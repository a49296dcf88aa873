"""Side by side: the same store workload on agl-events and on Agent Lightning 0.3.0, plus Kafka's raw limit.

    python -m agl_events.bench.compare --preset small|medium [--rollouts N --runners R --max-rounds M ...]
    python -m agl_events.bench.compare --preset agl-minimal --scale 4 --rollouts 128 --repeat 2

One invocation runs, in this order (so that each peak-memory reading only sees its own processes; with
`--repeat N` steps 1 and 2 alternate N times, and memory is read in the first round):
0. unless `--no-broker-warm-up`, our side on throwaway experiments until the local broker's JIT is warm
   (`warm_up_broker`);
1. our side: the embedded store server in this process, R runner processes with the KafkaTracer;
2. Agent Lightning's side: `agl_side.py` in a separate venv that has only agentlightning 0.3.0
   (created on first use under `.agl/bench-venv`), its in-memory store server and its own runners;
3. the raw limit: a bare producer loop sending the same spans, pre-encoded, to a throwaway topic;
4. the CPU cost of one span in each stage of our path (`stages`), measured alone.
Our side also reports the CPU seconds the store, the runners and the local broker spent while its clock ran.
It prints a table, then, as its LAST line, one JSON object (the figures, for scripts and the README).
Both sides are warmed up (every runner has run a rollout) before the clock starts; the clock runs
from the first enqueue to the last rollout seen finished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agl_events.bench import agl_side
from agl_events.bench.cpu import CpuMeter
from agl_events.bench.history import memory_mb
from agl_events.bench.profile import RUNNER_PARTS, STORE_PARTS, Parts, Profiler, cpu_parts, top_frames
from agl_events.bench.raw_limit import encode_span_payloads, raw_produce_per_s
from agl_events.bench.round_trips import per_rollout, read_requests
from agl_events.bench.stages import stage_costs
from agl_events.bench.store_latency import percentile
from agl_events.bench.workload import PRESETS, WorkloadParams, workload_agent
from agl_events.broker.local import LocalBroker, ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import delete_topics
from agl_events.log.clients import make_admin
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.embedded import embedded_store_server
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import EnqueueRolloutRequest

#: The JSON keys every run reports (the issue's contract; tests check them).
REQUIRED_KEYS = ("agl_rollouts_per_s", "agl_spans_per_s", "ours_rollouts_per_s", "ours_spans_per_s", "ratio_rollouts",
                 "ratio_spans", "raw_produce_per_s", "ingest_fraction_of_raw", "dispatch_p50_ms", "dispatch_p99_ms",
                 "rss_mb_peak")

#: The prefix of every experiment route, left out of the printed table.
EXPERIMENT_API = "/experiments/{experiment}/v1/agl"

#: agentlightning 0.3.0 swaps its OTLP exporter's endpoint through `exporter._endpoint`; from
#: opentelemetry-exporter-otlp 1.40-ish the endpoint lives in an inner client, so with the newest
#: OpenTelemetry its runners post spans to localhost:4318 instead of the store. Pin the release it was built on.
AGL_REQUIREMENTS = ("agentlightning==0.3.0", "opentelemetry-api==1.35.0", "opentelemetry-sdk==1.35.0",
                    "opentelemetry-exporter-otlp==1.35.0")


def _rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux: kilobytes


async def run_all(store: KafkaLightningStore, tasks: list[dict[str, Any]], batch_size: int) -> list[str]:
    ids: list[str] = []
    for i in range(0, len(tasks), batch_size):
        queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=t) for t in tasks[i:i + batch_size]])
        ids.extend(r.rollout_id for r in queued)
    done: set[str] = set()
    while len(done) < len(ids):
        finished = await store.wait_for_rollouts(rollout_ids=[i for i in ids if i not in done], timeout=1.0)
        done.update(r.rollout_id for r in finished)
    return ids


@asynccontextmanager
async def our_side(settings: Settings, params: WorkloadParams
                   ) -> AsyncIterator[tuple[KafkaLightningStore, str, RunnerPool]]:
    """Our store (an embedded server in this process, its view in a temporary folder) and our runner processes,
    every runner warmed by a rollout or two (short ones) before it is handed over: the store, its URL, the pool."""
    view_dir = Path(tempfile.mkdtemp(prefix="agl-bench-"))
    try:
        async with embedded_store_server(settings, view_dir) as (store, url):
            config = RunnerConfig(settings=settings, store_url=url, agent="x", concurrency=params.concurrency)
            pool = RunnerPool(config, params.our_processes(), name=f"bench-{uuid.uuid4().hex[:4]}",
                              agent=workload_agent)
            pool.start()
            try:
                slots = params.our_processes() * params.concurrency
                warm = params.model_copy(update={"rollouts": slots * 2, "max_rounds": 1, "span_sleep": 0.0,
                                                 "seed": 10_000 + params.seed})
                await run_all(store, warm.tasks(), params.batch_size)
                yield store, url, pool
            finally:
                pool.stop(grace=10)
    finally:
        shutil.rmtree(view_dir, ignore_errors=True)


async def measure_ours(settings: Settings, params: WorkloadParams, broker_pid: int | None = None,
                       profile_dir: Path | None = None) -> dict[str, Any]:
    """Our side (`our_side`) on the workload.

    `broker_pid` (the local broker's) adds the broker to the CPU accounting of the measured window;
    `profile_dir` has py-spy sample the store and every runner in that window (`bench.profile`); the files
    are in `profile_files` by group (`profile_figures` reads them).
    """
    async with our_side(settings, params) as (store, url, pool):
        runner_pids = [p.pid for p in pool.processes if p.pid]
        meter = CpuMeter({"store": [os.getpid()], "runners": runner_pids,
                          "broker": [broker_pid] if broker_pid else []})
        profiler = Profiler(profile_dir, {"store": os.getpid(),
                                          **{f"runner-{i}": pid for i, pid in enumerate(runner_pids)}}) \
            if profile_dir is not None else None
        if profiler is not None:
            profiler.start()
        calls_before = await read_requests(url)
        started = time.time()
        meter.start()
        ids = await run_all(store, params.tasks(), params.batch_size)
        cpu = meter.stop()
        seconds = time.time() - started  # the workload's window only: not the reads of figures after it
        calls = per_rollout(calls_before, await read_requests(url), len(ids))
        profiles = profiler.stop() if profiler is not None else {}
        spans, dispatch, finish = 0, [], []
        for rid in ids:
            rollout, attempt = await store.get_rollout_by_id(rid), await store.get_latest_attempt(rid)
            if rollout is not None and attempt is not None:
                dispatch.append((attempt.start_time - rollout.start_time) * 1000)
            if rollout is not None and rollout.end_time is not None:
                finish.append((rollout.end_time - rollout.start_time) * 1000)
            spans += (await store.query_spans(rid)).total
        runner_rss = max((memory_mb(pid) for pid in runner_pids), default=None)  # each its own, no other's
    return {"rollouts": len(ids), "spans": spans, "seconds": seconds,
            "dispatch_p50_ms": percentile(dispatch, 0.5), "dispatch_p99_ms": percentile(dispatch, 0.99),
            "finish_p50_ms": percentile(finish, 0.5), "finish_p99_ms": percentile(finish, 0.99),
            "cpu_seconds": cpu, "store_rss_mb_peak": _rss_mb(resource.RUSAGE_SELF),
            "runner_rss_mb_peak": runner_rss,
            "http_calls_per_rollout": sum(calls.values()), "http_calls_per_rollout_by_route": calls,
            "profile_files": {"store": [p for n, p in profiles.items() if n == "store"],
                              "runners": [p for n, p in profiles.items() if n != "store"]}}


def warm_up_broker(bootstrap: str, params: WorkloadParams, broker_pid: int, console: Console) -> list[float]:
    """`bench.broker_warm_up` in a process of its own (why: see there), its rounds shown as they end; the JIT
    compiler's share of the broker's CPU in each round."""
    command = [sys.executable, "-m", "agl_events.bench.broker_warm_up", "--bootstrap", bootstrap,
               "--broker-pid", str(broker_pid), "--params", params.model_dump_json()]
    shares: list[float] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            round_ = json.loads(line)
            shares.append(round_["jit_share"])
            console.print(f"[bold]0/4[/bold] warming the local broker: round {round_['round']}, "
                          f"{round_['rollouts']:,} rollouts, {round_['jit_share']:.0%} of its CPU compiling")
    if child.returncode != 0:
        raise RuntimeError(f"the broker's warm-up failed (exit status {child.returncode}); see above")
    return shares


def profile_figures(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Where each profiled group's CPU per rollout went, over every profiled round: the top frames, and the
    metered CPU milliseconds per rollout split over the parts of our path (`bench.profile`) by their shares of
    the samples. Shares, not sample counts: a sample is the GIL holder's stack at an instant of wall time, and
    on cores shared by more busy processes than they have, a holder waiting for a core is still sampled."""
    profiled = [r for r in rounds if any(r.get("profile_files", {}).values())]
    rollouts = sum(r["rollouts"] for r in profiled)
    figures: dict[str, Any] = {}
    groups: tuple[tuple[str, Parts], ...] = (("store", STORE_PARTS), ("runners", RUNNER_PARTS))
    for group, parts in groups:
        files = [path for r in profiled for path in r["profile_files"][group]]
        sampled = cpu_parts(files, parts) if files and rollouts else {}
        if not sampled:
            continue
        cpu_ms = sum(r["cpu_seconds"].get(group, 0.0) for r in profiled) / rollouts * 1000
        total = sum(sampled.values())
        figures[f"profile_{group}_top"] = [[f.frame, round(f.self_share, 3), round(f.total_share, 3)]
                                           for f in top_frames(files)]
        figures[f"profile_{group}_parts_ms"] = {part: round(cpu_ms * seconds / total, 3)
                                                for part, seconds in sampled.items()}
    return figures


def ensure_agl_venv(path: Path, console: Console) -> Path:
    """The interpreter of a venv holding only Agent Lightning 0.3.0; created once, then reused."""
    python = path / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import agentlightning"], capture_output=True,
                                          env=_agl_env()).returncode == 0:
        return python
    console.print(f"[dim]creating {path} with {' '.join(AGL_REQUIREMENTS)} (once)…[/dim]")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *AGL_REQUIREMENTS], check=True, env=_agl_env())
    return python


def _agl_env() -> dict[str, str]:
    # LiteLLM fetches its cost map from the internet at import unless told to use the bundled one.
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def measure_agl(python: Path, params: WorkloadParams, timeout: float = 1800) -> dict[str, Any]:
    """Run `agl_side.py` by path in the AGL venv; its last stdout line is its JSON result."""
    script = Path(agl_side.__file__).resolve()
    done = subprocess.run([str(python), str(script), *params.agl_side_args()], capture_output=True, text=True,
                          env=_agl_env(), timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"agl_side failed (rc {done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def summarize(params: WorkloadParams, ours: dict[str, Any], agl: dict[str, Any], raw: dict[str, float]
              ) -> dict[str, Any]:
    """The flat JSON object of the run; ratios are ours / AGL (above 1: we are faster)."""
    ours_rps, ours_sps = ours["rollouts"] / ours["seconds"], ours["spans"] / ours["seconds"]
    agl_rps, agl_sps = agl["rollouts"] / agl["seconds"], agl["spans"] / agl["seconds"]
    summary: dict[str, Any] = {
        **{f"param_{k}": v for k, v in params.model_dump().items()},
        "expected_spans": params.expected_spans(),
        "agl_rollouts_per_s": agl_rps, "agl_spans_per_s": agl_sps, "agl_spans": agl["spans"],
        "agl_seconds": agl["seconds"], "agl_dispatch_p50_ms": agl.get("dispatch_p50_ms"),
        "agl_dispatch_p99_ms": agl.get("dispatch_p99_ms"), "agl_store_rss_mb_peak": agl.get("store_rss_mb_peak"),
        "agl_children_rss_mb_peak": agl.get("children_rss_mb_peak"),
        "ours_rollouts_per_s": ours_rps, "ours_spans_per_s": ours_sps, "ours_spans": ours["spans"],
        "ours_seconds": ours["seconds"],
        "ratio_rollouts": ours_rps / agl_rps if agl_rps else None,
        "ratio_spans": ours_sps / agl_sps if agl_sps else None,
        **raw,
        "ingest_fraction_of_raw": ours_sps / raw["raw_produce_per_s"] if raw.get("raw_produce_per_s") else None,
        "dispatch_p50_ms": ours["dispatch_p50_ms"], "dispatch_p99_ms": ours["dispatch_p99_ms"],
        "finish_p50_ms": ours["finish_p50_ms"], "finish_p99_ms": ours["finish_p99_ms"],
        "agl_finish_p50_ms": agl.get("finish_p50_ms"), "agl_finish_p99_ms": agl.get("finish_p99_ms"),
        "rss_mb_peak": ours["store_rss_mb_peak"], "runner_rss_mb_peak": ours["runner_rss_mb_peak"],
        "http_calls_per_rollout": ours["http_calls_per_rollout"],
        "http_calls_per_rollout_by_route": {k: round(v, 3) for k, v in ours["http_calls_per_rollout_by_route"].items()},
        **cpu_figures(ours["cpu_seconds"], ours["rollouts"]),
    }
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in summary.items()}


def cpu_figures(cpu: dict[str, float], rollouts: int) -> dict[str, float]:
    """CPU seconds per part in the measured window, the same per rollout (what a target rate leaves each part:
    30x at ~11 rollouts/s is ~6 ms for all of them on 2 cores), and how busy the machine's cores were."""
    parts = {k: v for k, v in cpu.items() if k not in ("wall", "cores")}
    figures = {f"cpu_{k}_s": v for k, v in parts.items()}
    figures.update({f"cpu_ms_per_rollout_{k}": v / rollouts * 1000 for k, v in parts.items()} if rollouts else {})
    figures["cpu_busy_fraction"] = sum(parts.values()) / (cpu["wall"] * cpu["cores"])
    return figures


def render(summary: dict[str, Any], console: Console) -> None:
    """Human-readable table: one row per figure, our side against AGL's where both exist."""
    def fmt(v: Any) -> str:
        return "-" if v is None else f"{v:,.1f}" if isinstance(v, float) else str(v)

    processes = summary["param_our_runners"] or summary["param_runners"]
    table = Table(title=f"agl-events vs Agent Lightning 0.3.0 · {summary['param_rollouts']} rollouts, "
                        f"{summary['param_runners']} runners (ours: {processes} x {summary['param_concurrency']} "
                        f"slots), max_rounds {summary['param_max_rounds']}, span_sleep {summary['param_span_sleep']}")
    for column in ("figure", "agl-events", "Agent Lightning 0.3.0", "ours / AGL"):
        table.add_column(column, justify="right")
    table.add_row("rollouts/s", fmt(summary["ours_rollouts_per_s"]), fmt(summary["agl_rollouts_per_s"]),
                  fmt(summary["ratio_rollouts"]))
    if len(summary.get("rounds", [])) > 1:
        table.add_row("rollouts/s by round (ours, AGL, ratio)",
                      "; ".join(f"{o:.1f}, {a:.1f}, {r:.1f}x" for o, a, r in summary["rounds"]), "", "")
    table.add_row("spans/s", fmt(summary["ours_spans_per_s"]), fmt(summary["agl_spans_per_s"]),
                  fmt(summary["ratio_spans"]))
    table.add_row("spans stored (expected " + str(summary["expected_spans"]) + ")", fmt(summary["ours_spans"]),
                  fmt(summary["agl_spans"]), "")
    table.add_row("dispatch p50 / p99 ms", f"{fmt(summary['dispatch_p50_ms'])} / {fmt(summary['dispatch_p99_ms'])}",
                  f"{fmt(summary['agl_dispatch_p50_ms'])} / {fmt(summary['agl_dispatch_p99_ms'])}", "")
    table.add_row("enqueue to finished p50 / p99 ms",
                  f"{fmt(summary['finish_p50_ms'])} / {fmt(summary['finish_p99_ms'])}",
                  f"{fmt(summary['agl_finish_p50_ms'])} / {fmt(summary['agl_finish_p99_ms'])}", "")
    table.add_row("store peak RSS MB", fmt(summary["rss_mb_peak"]), fmt(summary["agl_store_rss_mb_peak"]), "")
    table.add_row("runner peak RSS MB", fmt(summary["runner_rss_mb_peak"]),
                  fmt(summary["agl_children_rss_mb_peak"]) + " (any child)", "")
    routes = ", ".join(f"{route.replace(EXPERIMENT_API, '')} {calls:.2f}"
                       for route, calls in summary["http_calls_per_rollout_by_route"].items())
    table.add_row("HTTP calls per rollout (ours)", f"{summary['http_calls_per_rollout']:.2f}: {routes}", "", "")
    table.add_row("raw producer msgs/s (same payloads)", fmt(summary["raw_produce_per_s"]), "", "")
    fraction = summary["ingest_fraction_of_raw"]
    table.add_row("our ingest / raw", "-" if fraction is None else f"{fraction:.2%}", "", "")
    cpu = ", ".join(f"{k[4:-2]} {v:.1f} s" for k, v in summary.items() if k.startswith("cpu_") and k.endswith("_s"))
    table.add_row("CPU in the window (ours)", cpu, "", "")
    per_rollout = ", ".join(f"{k[19:]} {v:.2f}" for k, v in summary.items() if k.startswith("cpu_ms_per_rollout_"))
    table.add_row("CPU ms per rollout (ours)", per_rollout, "", "")
    table.add_row("cores busy (ours)", f"{summary['cpu_busy_fraction']:.0%}", "", "")
    if summary.get("broker_warm_up_jit_shares"):
        table.add_row("local broker's warm-up: JIT share of its CPU by round",
                      ", ".join(f"{share:.0%}" for share in summary["broker_warm_up_jit_shares"]), "", "")
    stages = ", ".join(f"{k[6:-3]} {v:.0f}" for k, v in summary.items() if k.startswith("stage_") and k.endswith("_us"))
    table.add_row("one span, µs per stage (one core)", stages, "", "")
    if "history_spans" in summary:
        for who, rss, rate in (("store", "store_rss_mb_after_rebuild", "rebuild_spans_per_s"),
                               ("processor", "processor_rss_mb_after_rebuild", "processor_spans_per_s")):
            if rss in summary:
                table.add_row(f"{who} peak RSS rebuilding {summary['history_spans']:,} spans",
                              f"{fmt(summary[rss])} MB ({fmt(summary[rate])} spans/s)", "", "")
    console.print(table)
    for key in (k for k in summary if k.startswith("profile_") and k.endswith("_parts_ms")):
        console.print(f"[bold]{key[8:-9]}[/bold], CPU ms per rollout by part (its share of every round's py-spy "
                      "--gil samples):")
        for part, ms in summary[key].items():
            console.print(f"  {ms:6.3f}  {part}")
    for key in (k for k in summary if k.startswith("profile_") and k.endswith("_top")):
        console.print(f"[bold]{key[8:-4]}[/bold], top frames by self share of samples (total share):")
        for frame, own, total in summary[key]:
            console.print(f"  {own:6.1%} ({total:6.1%})  {frame}")


def run(settings: Settings, params: WorkloadParams, venv: Path | None = None, raw_messages: int | None = None,
        console: Console | None = None, profile_dir: Path | None = None, repeat: int = 1,
        warm_up: bool = True) -> dict[str, Any]:
    """The whole comparison; returns the summary (also what the last printed line holds). `profile_dir`:
    py-spy profiles of our store and runners (needs `py-spy`, in the test extra) in every round, summed.
    `warm_up`: first warm the local broker's JIT (`warm_up_broker`; a remote cluster is taken as in service).

    `repeat` rounds alternate the sides (ours, AGL, ours, AGL...), so a machine whose load moves during the
    run weighs on both alike; the summary's figures are the round with the median ratio, `rounds` holds
    every round's rollouts/s on each side and their ratio."""
    console = console or Console(stderr=True)
    bootstrap = ensure_broker(settings)
    python = ensure_agl_venv(venv or settings.home / "bench-venv", console)
    broker_pid = LocalBroker(settings).status().pid if settings.uses_local_broker else None
    warming = warm_up_broker(bootstrap, params, broker_pid, console) if warm_up and broker_pid is not None else []
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for round_ in range(1, repeat + 1):
        experiment = f"bench-{uuid.uuid4().hex[:8]}"
        ours_settings = settings.model_copy(update={"experiment": experiment, "bootstrap": bootstrap})
        try:
            console.print(f"[bold]1/4[/bold] agl-events: embedded store + runners (round {round_} of {repeat})…")
            ours = asyncio.run(measure_ours(ours_settings, params, broker_pid,
                                            None if profile_dir is None else profile_dir / f"round-{round_}"))
        finally:
            delete_topics(make_admin(bootstrap), f"agl.{experiment}.")
        console.print(f"[bold]2/4[/bold] Agent Lightning 0.3.0: agl store + LitAgentRunner (round {round_})…")
        pairs.append((ours, measure_agl(python, params)))
    rates = [(o["rollouts"] / o["seconds"], a["rollouts"] / a["seconds"]) for o, a in pairs]
    by_ratio = sorted(range(repeat), key=lambda i: rates[i][0] / rates[i][1])
    median = by_ratio[(repeat - 1) // 2]
    ours, agl = pairs[median]
    first = pairs[0][0]  # the store's peak RSS is this process's, which later rounds could only raise
    firsts = {k: v for k, v in first.items() if k.endswith("rss_mb_peak")}
    console.print("[bold]3/4[/bold] raw producer limit…")
    payloads = encode_span_payloads(params.tasks())
    raw = raw_produce_per_s(bootstrap, payloads, raw_messages or max(20_000, 4 * len(payloads)))
    console.print("[bold]4/4[/bold] cost of one span per stage…")
    return {**summarize(params, {**ours, **firsts}, agl, raw), **profile_figures([o for o, _ in pairs]),
            "rounds": [[round(o, 1), round(a, 1), round(o / a, 2)] for o, a in rates],
            "broker_warm_up_jit_shares": [round(share, 3) for share in warming],
            **{k: round(v, 3) for k, v in stage_costs(params.tasks()).items()}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    for name, field in WorkloadParams.model_fields.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(field.default), default=None,
                            help=field.description)
    parser.add_argument("--venv", type=Path, default=None, help="the AGL venv (default: <home>/bench-venv)")
    parser.add_argument("--raw-messages", type=int, default=None)
    parser.add_argument("--profile", type=Path, default=None, help="py-spy profiles of our store and runners here")
    parser.add_argument("--scale", type=float, default=1.0, help="the preset this many times smaller (rollouts, "
                        "runners, batch size; the rollouts' shape kept); the other flags apply after it")
    parser.add_argument("--repeat", type=int, default=1, help="rounds, alternating our side and AGL's")
    parser.add_argument("--no-broker-warm-up", action="store_true", help="measure the local broker as it is, even "
                        "just started (its JIT compiler then takes a large share of its CPU)")
    args = parser.parse_args(argv)
    overrides = {k: getattr(args, k) for k in WorkloadParams.model_fields if getattr(args, k) is not None}
    params = WorkloadParams.model_validate({**PRESETS[args.preset].scaled(args.scale).model_dump(), **overrides})
    summary = run(Settings.from_env(), params, args.venv, args.raw_messages, profile_dir=args.profile,
                  repeat=args.repeat, warm_up=not args.no_broker_warm_up)
    render(summary, Console(width=max(Console().width, 110)))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()

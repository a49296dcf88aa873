"""Replay figures: rebuild from offset 0, snapshot restore and rebuild from it, export, on one history.

    python -m agl_events.bench.replay [--rollouts 5000] [--calls 8] [--tail 0.1]

The history is made by the real store (in this process, on the broker): rollouts enqueued in batches, each
started, given an agent span, `--calls` LLM-call spans (token ids, logprobs, chat messages, as the proxy
records them) and a reward span, then finished; a new resources version every 500 rollouts. Then:

1. a rebuild from offset 0 into an empty folder (`replay rebuild --no-snapshot`): records/s and events/s;
2. a snapshot of that view; `--tail` more history; a rebuild from the snapshot (restore time, then the tail)
   against a second rebuild from offset 0, and their digests (they must be equal);
3. `replay export` of the whole history as triplets to Parquet and to JSONL: rows/s.

Figures are printed as a table and as a JSON last line; nothing is asserted but the digests' equality.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from rich.progress import Progress

from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.admin import create_topics, delete_topics
from agl_events.log.clients import make_admin
from agl_events.replay.cut import CutSpec
from agl_events.replay.digest import digest
from agl_events.replay.export import ExportCounts, ExportFilter, export_rows, write_jsonl, write_parquet
from agl_events.replay.rebuild import Rebuilt, rebuild
from agl_events.replay.snapshot import list_snapshots, partial_dir, restore, seal
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.readonly import ReadOnlyStore
from agl_events.types import LLM, EnqueueRolloutRequest, OtelResource, Span, SpanContext, TraceStatus

#: Rollouts between two resources versions in the history.
RESOURCES_EVERY = 500
#: Rollouts written concurrently while the history is made.
CONCURRENCY = 32


def llm_call_spans(rollout_id: str, attempt_id: str, calls: int, reward: float) -> list[Span]:
    """An agent span, `calls` LLM-call spans under it as the proxy records them, a reward span: one rollout's
    training trace (what TracerTraceToTriplet turns into `calls` triplets)."""
    trace_id = uuid.uuid4().hex

    def span(sequence_id: int, name: str, attributes: dict[str, Any], parent_id: str | None) -> Span:
        span_id = uuid.uuid4().hex[:16]
        return Span(rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id, trace_id=trace_id,
                    span_id=span_id, parent_id=parent_id, name=name, status=TraceStatus(status_code="OK"),
                    attributes=attributes, events=[], links=[], start_time=float(sequence_id),
                    end_time=sequence_id + 0.5,
                    context=SpanContext(trace_id=trace_id, span_id=span_id, is_remote=False, trace_state={}),
                    parent=None, resource=OtelResource(attributes={"service.name": "agent"}, schema_url=""))

    root = span(1, "agent.run", {"agent.name": "bench"}, None)
    spans = [root]
    for i in range(calls):
        spans.append(span(len(spans) + 1, "openai.chat.completion", {
            "gen_ai.request.model": "bench-model", "gen_ai.usage.prompt_tokens": 24,
            "gen_ai.usage.completion_tokens": 8,
            "prompt_token_ids": list(range(100, 124)), "response_token_ids": list(range(200 + i, 208 + i)),
            "logprobs.content": json.dumps([{"token": f"t{t}", "logprob": -0.1 * t} for t in range(8)]),
            "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": f"step {i}: what comes next in the plan?",
            "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": f"step {i} is done; next.",
        }, root.span_id))
    spans.append(span(len(spans) + 1, "agentlightning.annotation", {
        "agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": reward}, root.span_id))
    return spans


async def _rollout(store: KafkaLightningStore, rollout_id: str, calls: int, reward: float) -> None:
    attempt = (await store.start_attempt(rollout_id, "bench-worker")).attempt
    await store.add_many_spans(llm_call_spans(rollout_id, attempt.attempt_id, calls, reward))
    await store.update_attempt(rollout_id, attempt.attempt_id, status="succeeded")


async def make_history(settings: Settings, rollouts: int, calls: int, view: Path, first: int = 0) -> float:
    """Write `rollouts` finished rollouts through the real store; returns the seconds it took."""
    store = await KafkaLightningStore.open(settings, view_dir=view, scan_debounce_seconds=3600)
    started = time.perf_counter()
    try:
        with Progress(transient=True) as progress:
            bar = progress.add_task(f"writing {rollouts:,} rollouts", total=rollouts)
            for chunk in range(first, first + rollouts, CONCURRENCY):
                if chunk % RESOURCES_EVERY < CONCURRENCY:
                    await store.add_resources({"main": LLM(endpoint="http://bench/v1", model=f"v{chunk}")})
                numbers = range(chunk, min(chunk + CONCURRENCY, first + rollouts))
                ids = [r.rollout_id for r in await store.enqueue_many_rollouts(
                    [EnqueueRolloutRequest(input={"task": n}, mode="train") for n in numbers])]
                await asyncio.gather(*(_rollout(store, rid, calls, (n % 4) / 3) for n, rid in enumerate(ids)))
                progress.update(bar, advance=len(ids))
    finally:
        await store.close()
    return time.perf_counter() - started


async def _digest(view: Path) -> str:
    store = ReadOnlyStore.open(view)
    try:
        return (await digest(store)).value
    finally:
        await store.close()


def _rebuild(settings: Settings, to: Path, snapshots: Path | None = None) -> Rebuilt:
    with Progress(transient=True) as progress:
        bar = progress.add_task(f"rebuilding into {to.name}", total=None)
        return rebuild(settings, to, CutSpec(), snapshots=snapshots,
                       progress=lambda done, total: progress.update(bar, completed=done, total=total))


def _export(settings: Settings, out: Path) -> tuple[int, float]:
    counts, started = ExportCounts(), time.perf_counter()
    rows = export_rows(settings, "triplet", ExportFilter(), counts=counts)
    written = write_parquet(rows, out, "triplet") if out.suffix == ".parquet" else write_jsonl(rows, out)
    return written, time.perf_counter() - started


def measure(settings: Settings, rollouts: int, calls: int, tail: float) -> dict[str, Any]:
    bootstrap = ensure_broker(settings)
    settings = settings.model_copy(update={"bootstrap": bootstrap,
                                           "experiment": f"bench-replay-{uuid.uuid4().hex[:8]}"})
    create_topics(make_admin(bootstrap), settings.experiment)
    work = Path(tempfile.mkdtemp(prefix="agl-bench-replay-"))
    figures: dict[str, Any] = {"rollouts": rollouts, "spans_per_rollout": calls + 2}
    try:
        figures["history_seconds"] = asyncio.run(make_history(settings, rollouts, calls, work / "live"))
        full = _rebuild(settings, work / "full")
        figures |= {"records": full.records, "events_folded": full.folded, "rebuild_seconds": full.seconds,
                    "rebuild_records_per_s": full.records_per_second,
                    "rebuild_events_per_s": full.folded / full.seconds}
        snapshots = work / "snapshots"
        partial = partial_dir(snapshots, settings.experiment, time.time())
        shutil.copytree(full.path, partial / "view")
        seal(partial, settings.experiment, time.time(), full.cut)
        more = max(1, int(rollouts * tail))
        asyncio.run(make_history(settings, more, calls, work / "live", first=rollouts))
        started = time.perf_counter()
        restore(list_snapshots(snapshots, settings.experiment)[-1], work / "restored")
        figures["snapshot_restore_seconds"] = time.perf_counter() - started
        shutil.rmtree(work / "restored")
        from_snapshot = _rebuild(settings, work / "from-snapshot", snapshots)
        again = _rebuild(settings, work / "from-zero")
        figures |= {"tail_rollouts": more, "rebuild_from_snapshot_seconds": from_snapshot.seconds,
                    "rebuild_from_snapshot_records": from_snapshot.records,
                    "rebuild_from_zero_seconds": again.seconds, "rebuild_from_zero_records": again.records}
        snapshot_digest, zero_digest = asyncio.run(_digest(from_snapshot.path)), asyncio.run(_digest(again.path))
        if snapshot_digest != zero_digest:
            raise RuntimeError(f"rebuild from the snapshot differs from offset 0: {snapshot_digest} {zero_digest}")
        figures["digests_equal"] = True
        for suffix in ("parquet", "jsonl"):
            rows, seconds = _export(settings, work / f"export.{suffix}")
            figures |= {f"export_{suffix}_rows": rows, f"export_{suffix}_rows_per_s": rows / seconds}
    finally:
        delete_topics(make_admin(bootstrap), f"agl.{settings.experiment}.")
        shutil.rmtree(work, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rollouts", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=8, help="LLM-call spans per rollout")
    parser.add_argument("--tail", type=float, default=0.1, help="history added after the snapshot, as a fraction")
    args = parser.parse_args()
    figures = measure(Settings.from_env(), args.rollouts, args.calls, args.tail)
    for name, value in figures.items():
        print(f"{name:32s} {value:14,.1f}" if isinstance(value, float) else f"{name:32s} {value!s:>14}")
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()

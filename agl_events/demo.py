"""The end-to-end job `make demo` runs: a small training-style workload through the Kafka store.

It publishes a prompt template, enqueues rollouts, lets simulated runners dequeue them, write spans
with rewards and finish their attempts (a few fail once and are retried), waits for every rollout,
then rebuilds the view from offset 0 into an empty folder to show the log alone holds the truth.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agl_events.config import Settings
from agl_events.store.kafka import KafkaLightningStore
from agl_events.types import (
    EnqueueRolloutRequest,
    OtelResource,
    PromptTemplate,
    RolloutConfig,
    Span,
    TraceStatus,
)


@dataclass
class DemoReport:
    rollouts: int
    succeeded: int
    retried: int
    spans: int
    mean_reward: float
    seconds: float
    rebuilt_counts: dict[str, int]
    live_counts: dict[str, int]


def reward_span(rollout_id: str, attempt_id: str, seq: int, value: float) -> Span:
    """A reward span in Agent Lightning's format, so its adapters read it (`agentlightning.annotation`)."""
    now = time.time()
    return Span(
        rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=seq, trace_id=uuid.uuid4().hex,
        span_id=uuid.uuid4().hex[:16], parent_id=None, name="agentlightning.annotation",
        status=TraceStatus(status_code="OK"),
        attributes={"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value},
        events=[], links=[], start_time=now, end_time=now, context=None, parent=None,
        resource=OtelResource(attributes={}, schema_url=""),
    )


async def _runner(store: KafkaLightningStore, name: str, rng: random.Random, progress: Progress, task: int
                  ) -> None:
    """A stand-in for a runner: dequeue, 'call the model' (spans), reward, finish; fail sometimes."""
    while True:
        claimed = await store.dequeue_rollout(worker_id=name)
        if claimed is None:
            return
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id
        seqs = await store.get_many_span_sequence_ids([(rid, aid)] * 3)
        spans = [reward_span(rid, aid, s, 0.0) for s in seqs[:2]]
        for span in spans:
            span.name, span.attributes = "openai.chat.completion", {"gen_ai.prompt.0.content": str(claimed.input)}
        score = rng.random()
        await store.add_many_spans([*spans, reward_span(rid, aid, seqs[2], score)])
        failed = claimed.attempt.sequence_id == 1 and rng.random() < 0.1
        await store.update_attempt(rid, aid, status="failed" if failed else "succeeded")
        if not failed:
            progress.advance(task)


async def run_demo(settings: Settings, rollouts: int = 200, runners: int = 4, seed: int = 7,
                   console: Console | None = None) -> DemoReport:
    console = console or Console()
    view_root = Path(tempfile.mkdtemp(prefix="agl-demo-"))
    store = await KafkaLightningStore.open(settings, view_dir=view_root / "live")
    started = time.perf_counter()
    try:
        await store.add_resources({"prompt": PromptTemplate(template="Solve: {question}", engine="f-string")})
        config = RolloutConfig(max_attempts=2, retry_condition=["failed"])
        queued = await store.enqueue_many_rollouts(
            [EnqueueRolloutRequest(input={"question": f"{i} + {i}"}, mode="train", config=config)
             for i in range(rollouts)])
        ids = [r.rollout_id for r in queued]
        rng = random.Random(seed)
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(f"{runners} runners working", total=rollouts)
            await asyncio.gather(*[_runner(store, f"demo-runner-{i}", rng, progress, task) for i in range(runners)])
        done = await store.wait_for_rollouts(rollout_ids=ids, timeout=0)
        seconds = time.perf_counter() - started
        attempts = [len(await store.query_attempts(rid)) for rid in ids]
        rewards = []
        for rid in ids:
            spans = await store.query_spans(rid, "latest", name="agentlightning.annotation")
            rewards.extend(float(s.attributes["agentlightning.reward.0.value"]) for s in spans)
        live = await store.statistics()
    finally:
        await store.close()
    rebuilt_store = await KafkaLightningStore.open(settings, view_dir=view_root / "rebuilt")
    rebuilt = await rebuilt_store.statistics()
    await rebuilt_store.close()
    shutil.rmtree(view_root, ignore_errors=True)
    keys = ("total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers")
    return DemoReport(
        rollouts=len(ids), succeeded=sum(r.status == "succeeded" for r in done),
        retried=sum(n > 1 for n in attempts), spans=int(live["total_spans"]),
        mean_reward=sum(rewards) / max(len(rewards), 1), seconds=seconds,
        live_counts={k: int(live[k]) for k in keys}, rebuilt_counts={k: int(rebuilt[k]) for k in keys},
    )


def print_report(report: DemoReport, settings: Settings, console: Console) -> None:
    table = Table(title=f"agl-events demo · experiment {settings.experiment} · {settings.bootstrap_servers}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("rollouts enqueued", str(report.rollouts))
    table.add_row("succeeded", str(report.succeeded))
    table.add_row("retried after a failed attempt", str(report.retried))
    table.add_row("spans in the experiment (all runs)", str(report.spans))
    table.add_row("mean final reward", f"{report.mean_reward:.3f}")
    table.add_row("wall time", f"{report.seconds:.2f} s")
    table.add_row("rollouts/s", f"{report.rollouts / report.seconds:.1f}")
    console.print(table)
    same = report.live_counts == report.rebuilt_counts
    console.print(("[green]" if same else "[red]") +
                  f"view rebuilt from offset 0 into an empty folder: {report.rebuilt_counts} "
                  f"({'identical to' if same else 'DIFFERENT from'} the live view)")

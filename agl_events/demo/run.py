"""The end-to-end job `make demo` runs: a Trainer with real runner processes on the Kafka store.

The Trainer publishes a prompt template, hosts the store, starts runner processes that take tasks from
the task topic, run `demo.agent.adder` under the Kafka tracer and report back; about 10% of first
attempts fail and are retried by their RolloutConfig. Afterwards the view is rebuilt from offset 0 into
an empty folder to show that the log alone holds the truth.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agl_events.algorithm import Baseline
from agl_events.config import Settings
from agl_events.demo.agent import adder
from agl_events.store.kafka import KafkaLightningStore
from agl_events.trainer import Trainer
from agl_events.types import PromptTemplate, RolloutConfig

STAT_KEYS = ("total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers")


@dataclass
class DemoReport:
    rollouts: int
    succeeded: int
    retried: int
    mean_reward: float
    seconds: float
    live_counts: dict[str, int]
    rebuilt_counts: dict[str, int]


def live_and_rebuilt(settings: Settings, live: Path, rebuilt: Path) -> tuple[dict[str, int], dict[str, int]]:
    """The store's counts from the live view, and from a view rebuilt from offset 0 into the empty `rebuilt`."""
    return asyncio.run(_counts(settings, live)), asyncio.run(_counts(settings, rebuilt))


async def _counts(settings: Settings, view_dir: Path) -> dict[str, int]:
    store = await KafkaLightningStore.open(settings, view_dir=view_dir)
    try:
        stats = await store.statistics()
        return {k: int(stats[k]) for k in STAT_KEYS}
    finally:
        await store.close()


def run_demo(settings: Settings, rollouts: int = 200, runners: int = 4) -> DemoReport:
    root = Path(tempfile.mkdtemp(prefix="agl-demo-"))
    trainer = Trainer(Baseline(), n_runners=runners, settings=settings, view_dir=root / "live",
                      initial_resources={"prompt_template": PromptTemplate(template="What is {a} + {b}?",
                                                                           engine="f-string")},
                      rollout_config=RolloutConfig(max_attempts=2, retry_condition=["failed"]))
    dataset = [{"a": i, "b": 2 * i + 1} for i in range(rollouts)]
    started = time.perf_counter()
    result = trainer.fit(adder, dataset)["train"]
    seconds = time.perf_counter() - started
    live, rebuilt = live_and_rebuilt(trainer.settings_used, root / "live", root / "rebuilt")
    shutil.rmtree(root, ignore_errors=True)
    return DemoReport(rollouts=len(result.rollouts), succeeded=result.succeeded, retried=result.retried,
                      mean_reward=result.mean_reward or 0.0, seconds=seconds, live_counts=live,
                      rebuilt_counts=rebuilt)


def print_report(report: DemoReport, settings: Settings, console: Console) -> None:
    table = Table(title=f"agl-events demo · experiment {settings.experiment} · {settings.bootstrap_servers}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("rollouts (this run)", str(report.rollouts))
    table.add_row("succeeded", str(report.succeeded))
    table.add_row("retried after a failed attempt", str(report.retried))
    table.add_row("mean reward", f"{report.mean_reward:.3f}")
    table.add_row("wall time, runners' start included", f"{report.seconds:.1f} s")
    table.add_row("spans in the experiment (all runs)", str(report.live_counts["total_spans"]))
    console.print(table)
    print_rebuild(report.live_counts, report.rebuilt_counts, console)


def print_rebuild(live: dict[str, int], rebuilt: dict[str, int], console: Console) -> None:
    same = live == rebuilt
    console.print(("[green]" if same else "[red]") + f"view rebuilt from offset 0 into an empty folder: {rebuilt} "
                  f"({'identical to' if same else 'DIFFERENT from'} the live view)")

"""Trainer: hosts the store, starts the runners, runs the algorithm, and shuts everything down.

`fit(agent, train_dataset, val_dataset)` and `dev(agent, dataset)` as in Agent Lightning 0.3.0. The store
lives in this process (the algorithm calls it directly) and is also served over HTTP on a free local port,
which the runner processes use for their few control calls; their spans go straight to Kafka. When the
algorithm asks for a sample stream, the samples worker (`agl-events samples`) starts beside them, with
the Trainer's adapter.

OpenTelemetry's global tracer provider: the runner processes take it, each in its own process (so instrumented
libraries' spans reach the rollouts, see `agl_events.runner.worker`); this process is the user's, runs no
agent, and keeps whatever provider the user set (none is installed here, with runners or with `n_runners=0`).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from agl_events.adapter.build import AdapterSpec, build_adapter, spec_string
from agl_events.agent import LitAgent
from agl_events.algorithm import Algorithm, AlgorithmContext, Baseline, SplitResult
from agl_events.algorithm.metrics import TrainerMetrics
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.log.registry import codec_for
from agl_events.log.writer import EventWriter
from agl_events.processors.background import WorkerProcess, samples_worker
from agl_events.runner.control import stop_request
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.embedded import embedded_store_server
from agl_events.types import NamedResources, RolloutConfig

log = logging.getLogger(__name__)


class Trainer:
    def __init__(self, algorithm: Algorithm | None = None, n_runners: int = 1,
                 initial_resources: NamedResources | None = None, adapter: AdapterSpec = None, *,
                 settings: Settings | None = None, rollout_config: RolloutConfig | None = None,
                 host: str = "127.0.0.1", port: int | None = None, view_dir: Path | None = None,
                 progress: bool = True, runner_concurrency: int = 1) -> None:
        """`n_runners=0` starts no runner: runners elsewhere join with the printed store URL. Each runner
        runs up to `runner_concurrency` rollouts at once (`agl-events runner --concurrency`): an agent that
        mostly waits on its model, as the demo's does, leaves a runner idle between calls otherwise.

        `adapter` is upstream's component spec: an instance, a class, a factory, an import string or short
        name (`"TraceToMessages"`), or a dict (`{"type": ..., **kwargs}`; without `type`, TracerTraceToTriplet's
        kwargs); None means TracerTraceToTriplet(). Algorithms get it as `ctx.adapter`.
        """
        self.algorithm = algorithm or Baseline()
        self.n_runners = n_runners
        self.runner_concurrency = runner_concurrency
        self.initial_resources = initial_resources
        self.adapter = build_adapter(adapter)
        self.adapter_spec = spec_string(adapter, self.adapter)  # what the samples worker builds
        self.settings = settings or Settings.from_env()
        self.rollout_config = rollout_config or RolloutConfig()
        self.host = host
        self.port = port
        self.view_dir = view_dir
        self.progress = progress
        self.store_url: str | None = None
        self.settings_used: Settings = self.settings  # with the bootstrap servers actually used

    def fit(self, agent: LitAgent[Any], train_dataset: Sequence[Any],
            val_dataset: Sequence[Any] | None = None) -> dict[str, SplitResult]:
        """Train: the algorithm decides what to run; blocks until it is done (Ctrl-C stops everything)."""
        return asyncio.run(self._session(agent, self.algorithm, train_dataset, val_dataset))

    def dev(self, agent: LitAgent[Any], dataset: Sequence[Any]) -> SplitResult:
        """Run `dataset` once through the whole machinery (mode val) to check agent and setup."""

        class _Dev:
            async def run(self, ctx: AlgorithmContext, train: Sequence[Any], val: Sequence[Any] | None
                          ) -> dict[str, SplitResult]:
                return {"val": await ctx.run_split(train, "val")}

        return asyncio.run(self._session(agent, _Dev(), dataset, None))["val"]

    async def _session(self, agent: LitAgent[Any], algorithm: Algorithm, train: Sequence[Any],
                       val: Sequence[Any] | None) -> dict[str, SplitResult]:
        bootstrap = await asyncio.to_thread(ensure_broker, self.settings)
        settings = self.settings_used = self.settings.model_copy(update={"bootstrap": bootstrap})
        view_dir = self.view_dir or Path(tempfile.mkdtemp(prefix="agl-trainer-"))
        metrics = TrainerMetrics(settings.experiment)
        async with embedded_store_server(settings, view_dir, host=self.host, port=self.port,
                                         trainer=metrics) as (store, url):
            self.store_url = url
            pool: RunnerPool | None = None
            samples: list[WorkerProcess] = []
            try:
                if self.initial_resources:
                    await store.add_resources(self.initial_resources)
                if self.n_runners:
                    config = RunnerConfig(settings=settings, store_url=url, agent="<object>",
                                          concurrency=self.runner_concurrency)
                    pool = RunnerPool(config, self.n_runners, name=f"trainer-{int(time.time())}", agent=agent)
                    pool.start()
                log.info("store for runners: %s", url)
                with _progress_bar(self.progress) as on_progress:
                    ctx = AlgorithmContext(store, self.adapter, self.rollout_config, on_progress=on_progress,
                                           settings=settings, store_url=url, trainer_metrics=metrics,
                                           on_sample_stream=lambda: self._start_samples(settings, samples))
                    return await algorithm.run(ctx, train, val)
            finally:
                await self._shutdown(settings, pool)
                for worker in samples:
                    await asyncio.to_thread(worker.stop)

    def _start_samples(self, settings: Settings, started: list[WorkerProcess]) -> None:
        """The samples worker (`agl-events samples`) in a child process, once, when an algorithm reads samples.

        Its buffer lives under the home folder, so a restarted trainer's worker resumes where it stopped.
        """
        if started:
            return
        home = settings.home / "samples"
        started.append(samples_worker(settings, home / settings.experiment, home / f"{settings.experiment}.log",
                                      adapter=self.adapter_spec))
        log.info("samples worker started (adapter %s, log %s)", self.adapter_spec, started[0].log_file)

    async def _shutdown(self, settings: Settings, pool: RunnerPool | None) -> None:
        """Stop runners cooperatively (a stop event, which reaches runners elsewhere too), then reap ours."""
        writer = EventWriter(settings.bootstrap_servers, settings.experiment,
                             codec_for(settings.schema_registry_url), producer_id="trainer")
        await asyncio.to_thread(writer.append_sync, [stop_request("trainer", time.time(), reason="trainer done")])
        await asyncio.to_thread(writer.close)
        if pool is not None:
            await asyncio.to_thread(pool.stop, 30.0)


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """A rich progress bar per dataset split (on stderr), or nothing."""
    if not enabled:
        yield None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=False) as progress:
        bars: dict[str, TaskID] = {}

        def update(mode: str, finished: int, total: int) -> None:
            if mode not in bars:
                bars[mode] = progress.add_task(f"{mode or 'rollouts'} rollouts", total=total)
            progress.update(bars[mode], completed=finished)

        yield update

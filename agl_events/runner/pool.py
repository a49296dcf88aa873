"""Starting N runner processes on this machine and stopping them cooperatively."""

from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.process import BaseProcess
from typing import Any

from agl_events.agent import LitAgent
from agl_events.runner.worker import RunnerConfig, run_runner


class RunnerPool:
    """N runner processes (spawned: no inherited Kafka clients or event loops). Each stops, as on SIGTERM, when
    the process that made the pool is gone (`proc.parent`): a SIGKILLed trainer leaves no runner behind."""

    def __init__(self, config: RunnerConfig, n: int, name: str = "runner", agent: LitAgent[Any] | None = None
                 ) -> None:
        """`agent` (picklable: defined at module level) overrides `config.agent`'s module:object."""
        context = multiprocessing.get_context("spawn")
        self.processes: list[BaseProcess] = [
            context.Process(target=run_runner, name=f"{name}-{i}", daemon=False,
                            args=(config.model_copy(update={"runner_id": f"{name}-{i}"}), agent, os.getpid()))
            for i in range(n)
        ]

    def start(self) -> None:
        for process in self.processes:
            process.start()

    def alive(self) -> list[BaseProcess]:
        return [p for p in self.processes if p.is_alive()]

    def stop(self, grace: float = 30.0) -> None:
        """Ask each runner to finish its rollout and exit; kill what is still there after `grace` seconds."""
        for process in self.alive():
            process.terminate()  # SIGTERM: the runner stops after its current rollout
        deadline = time.monotonic() + grace
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.alive():
            process.kill()
            process.join(5)

    def wait(self) -> None:
        for process in self.processes:
            process.join()

"""A processor worker as a child process, for whoever needs one next to it: the Trainer, tests, scripts.

A faust worker owns its event loop and signal handlers, so it runs in a process of its own: `python -m
agl_events.processors.<app>` (what `agl-events processor` / `agl-events samples` run, without the command line's
imports), its output in a log file, its settings passed on. Stopping it with SIGTERM is a clean stop:
its streams drain, its state is closed, it leaves the group. It inherits the caller's working directory,
so an adapter module next to the caller's script is importable in the worker too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

from agl_events.adapter.build import DEFAULT_ADAPTER
from agl_events.config import Settings
from agl_events.proc.child import ChildProcess
from agl_events.proc.ports import free_port


class WorkerProcess(ChildProcess):
    """One processor worker (`agl_events.processors.views`, `agl_events.processors.samples`) in a child process,
    own web port; started at once. It stops when this process is gone (`--parent-pid`), even SIGKILLed."""

    def __init__(self, settings: Settings, module: str, args: Sequence[str], log_file: Path,
                 web_port: int | None = None) -> None:
        self.port = web_port or free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "AGL_HOME": str(settings.home)}
        if settings.schema_registry_url:
            env["AGL_SCHEMA_REGISTRY_URL"] = settings.schema_registry_url
        super().__init__([sys.executable, "-m", module, "--experiment", settings.experiment,
                          "--bootstrap", settings.bootstrap_servers, *args, "--web-port", str(self.port),
                          "--parent-pid", str(os.getpid())],
                         log_file, env=env)
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def samples_worker(settings: Settings, data_dir: Path, log_file: Path, adapter: str = DEFAULT_ADAPTER,
                   loglevel: str = "info", web_port: int | None = None) -> WorkerProcess:
    """Start a samples worker (as `agl-events samples` would); use it as a context manager to stop it on exit."""
    args = ["--adapter", adapter, "--data-dir", str(data_dir), "--loglevel", loglevel]
    return WorkerProcess(settings, "agl_events.processors.samples", args, log_file, web_port)


@contextlib.contextmanager
def stopped_on_exit(sig: int = signal.SIGTERM) -> Iterator[list[WorkerProcess]]:
    """Every worker appended in the block is stopped with `sig` when it ends, however it ends."""
    started: list[WorkerProcess] = []
    try:
        yield started
    finally:
        for worker in started:
            worker.stop(sig)

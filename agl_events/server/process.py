"""A store server as a child process (`agl-events store`), on a port and views folder of its own that a
restart keeps: what chaos runs and tests start when they need a real server they can kill and start again."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from agl_events.config import Settings
from processors.background import free_port


class StoreProcess:
    """`python -m agl_events store` in a child process, its output appended to `log`."""

    def __init__(self, settings: Settings, views: Path, log: Path, *options: str) -> None:
        """`options` go after `store` (e.g. `--read-only`)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base = f"{self.url}/v1/agl"
        self._command = [sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                         "--experiment", settings.experiment, "--home", str(settings.home), "store", "--port",
                         str(self.port), "--views", str(views), "--log-level", "warning", *options]
        self._log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True, timeout: float = 60.0, restart_exits: bool = False) -> None:
        """Start it; with `wait`, until it answers (see `wait_ready`)."""
        self._spawn()
        if wait:
            self.wait_ready(timeout, restart_exits)

    def _spawn(self) -> None:
        with self._log.open("ab") as out:
            self.process = subprocess.Popen(self._command, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 60.0, restart_exits: bool = False) -> None:
        """Wait until its view has caught up (statistics touch the store, so they answer only then). With
        `restart_exits`, a process that exits meanwhile (no broker yet, say) is started again, as a supervisor
        would; otherwise the wait fails with the end of its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/statistics", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if not self.alive():
                if not restart_exits:
                    break
                self._spawn()
            time.sleep(0.2)
        raise TimeoutError(f"the store server is not ready; the end of {self._log}:\n"
                           f"{self._log.read_text(errors='replace')[-3000:]}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill9(self) -> None:
        """SIGKILL: a crash, nothing flushed or closed."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM (a clean stop), SIGKILL after `grace` seconds."""
        if self.alive():
            assert self.process is not None
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill9()

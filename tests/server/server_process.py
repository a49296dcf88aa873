"""A store server as a real separate process, for tests that kill it or drive it from a CLI."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from agl_events.config import Settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`python -m agl_events store` as a real separate process, restartable on the same views folder."""

    def __init__(self, settings: Settings, views: Path, log: Path, *options: str) -> None:
        """`options` go after `store` (e.g. `--read-only`)."""
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}/v1/agl"
        self._cmd = [sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                     "--experiment", settings.experiment, "store", "--port", str(self.port),
                     "--views", str(views), "--log-level", "warning", *options]
        self._log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True) -> None:
        with self._log.open("ab") as out:
            self.proc = subprocess.Popen(self._cmd, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # statistics touches the store: it answers only once the view caught up
                if httpx.get(f"{self.base}/statistics", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"store server not ready; log:\n{self._log.read_text()[-3000:]}")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

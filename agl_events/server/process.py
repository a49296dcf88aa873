"""A store server as a child process (`agl-events store`), on a port and views folder of its own that a
restart keeps: what tests start when they need a real server they can kill and start again."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx

from agl_events.config import Settings
from agl_events.proc.child import ChildProcess
from agl_events.proc.ports import free_port


class StoreProcess(ChildProcess):
    """`python -m agl_events store` in a child process, its output appended to `log`."""

    def __init__(self, settings: Settings, views: Path, log: Path, *options: str) -> None:
        """`options` go after `store` (e.g. `--read-only`)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base = f"{self.url}/v1/agl"
        super().__init__([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                          "--experiment", settings.experiment, "--home", str(settings.home), "store", "--port",
                          str(self.port), "--views", str(views), "--log-level", "warning", *options], log)

    def start(self, wait: bool = True, timeout: float = 60.0) -> int:
        """Start it; with `wait`, until it answers (see `wait_ready`)."""
        pid = super().start()
        if wait:
            self.wait_ready(timeout)
        return pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until its view has caught up (statistics touch the store, so they answer only then); a process
        that exits meanwhile fails the wait with the end of its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.alive():
            if store_ready(self.url):
                return
            time.sleep(0.2)
        raise TimeoutError(f"the store server is not ready; the end of {self.log_file}:\n{self.tail(60)}")


def store_ready(url: str, timeout: float = 5.0, auth_token: str | None = None) -> bool:
    """Whether the store server at `url` answers for its default experiment: its view has caught up with the
    log (statistics touch the store, which answers nothing before that), not merely that it listens."""
    headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
    try:
        return httpx.get(f"{url}/v1/agl/statistics", timeout=timeout, headers=headers).status_code == 200
    except httpx.HTTPError:
        return False

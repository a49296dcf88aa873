"""A processor worker started with `WorkerProcess` ends with the process that started it, even a SIGKILLed one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agl_events.config import Settings
from tests.eventually import eventually
from tests.orphans import exited, orphan

pytestmark = pytest.mark.kafka

#: A parent that starts a samples worker, says its pid once it serves, and waits to be SIGKILLed.
ORPHANING_PARENT = """
import json, sys, threading
from pathlib import Path
import httpx
from tests.eventually import eventually
from agl_events.config import Settings
from agl_events.processors.background import samples_worker
job = json.loads(sys.stdin.read())
folder = Path(job["folder"])
worker = samples_worker(Settings.model_validate(job["settings"]), folder / "data", folder / "worker.log")
eventually(lambda: httpx.get(f"{worker.url}/samples/stats", timeout=5).status_code == 200, "the worker serves",
           within=120, ignoring=(httpx.TransportError,))
print(worker.pid, flush=True)
threading.Event().wait()
"""


def test_a_samples_worker_stops_when_the_process_that_started_it_is_killed(settings: Settings, tmp_path: Path
                                                                         ) -> None:
    job = {"settings": settings.model_dump(mode="json"), "folder": str(tmp_path)}
    line, _ = orphan(ORPHANING_PARENT, json.dumps(job))
    worker = int(line)
    eventually(lambda: exited(worker), f"the orphaned samples worker {worker} exits", within=90)
    log = (tmp_path / "worker.log").read_text()
    assert "Traceback" not in log and "Stopping" in log, log  # stopped as on SIGTERM, rather than failed

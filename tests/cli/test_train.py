"""`agl-events train history`: committed steps as a table and as JSON (an aborted step's record never shows),
and an experiment with no steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agl_events.config import Settings
from agl_events.log.consumer import GroupConsumer
from agl_events.log.transactions import OutRecord, TransactionalWriter
from agl_events.samples.steps import SampleRef, StepRecord
from agl_events.topics import Topic, topic_name

pytestmark = pytest.mark.kafka


def _history(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "--experiment", settings.experiment, "train", "history", *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})


def _record(step: int, used: int, dropped: int, reward: float) -> StepRecord:
    ref = SampleRef(sample_id="s", partition=0, offset=0)
    return StepRecord(step=step, version=step + 2, weights_uri="file:///w.pt", time=1.8e9, trainer="t",
                      trained=[ref] * used, dropped=[ref] * dropped, offsets={0: 1}, mean_reward=reward)


def test_history_lists_committed_steps_only(settings: Settings) -> None:
    assert _history(settings).returncode == 1  # nothing yet
    topic = topic_name(settings.experiment, Topic.STEPS)
    samples = GroupConsumer(settings.bootstrap_servers, f"g-{settings.experiment}", "samples")
    writer = TransactionalWriter(settings.bootstrap_servers, f"t-{settings.experiment}")
    try:
        for step, reward in ((0, 0.25), (1, 0.5)):
            writer.commit([OutRecord(topic, b"t", _record(step, 4, step, reward).encode())], {}, samples)

        def crash() -> None:  # as a trainer killed with its transaction open
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            writer.commit([OutRecord(topic, b"t", _record(2, 4, 0, 0.9).encode())], {}, samples, before_commit=crash)
    finally:
        samples.close()
    TransactionalWriter(settings.bootstrap_servers, f"t-{settings.experiment}").close()  # fences it: aborted

    done = _history(settings, "--json")
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert [(s["step"], s["version"], s["used"], s["dropped"], s["mean_reward"]) for s in steps] == [
        (0, 2, 4, 0, 0.25), (1, 3, 4, 1, 0.5)]
    table = _history(settings)
    assert table.returncode == 0 and "v3" in table.stdout and "0.500" in table.stdout and "v4" not in table.stdout

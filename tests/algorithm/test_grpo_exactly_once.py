"""Exactly-once GRPO steps: a pipelined trainer SIGKILLed at two points of a step (its weights written and its
record and offsets sent in a transaction not yet committed; committed but its weights not yet published) and
started again each time goes on after its last committed step (weights and optimiser state), and ends with
every sample on the samples topic accounted for exactly once, from the step records and the topic: trained
by one step, dropped as stale by one, or (at or beyond the last committed offsets only) not consumed yet;
every step committed once. Retrained offline on the batches its step records name, the run ends at the
weights it published last, bit for bit, restarts and all.

Also the restart test of GRPO: about 3 minutes under load for three trainer processes, each starting its
store, runner, samples worker, policy server and LLM proxy (which a kill cannot skip)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import torch

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.events.kinds import Kind
from agl_events.log.clients import make_consumer
from agl_events.log.offsets import read_to_end
from agl_events.log.records import decode_record
from agl_events.policy.weights import load_weights, weights_path
from agl_events.proc.child import ChildProcess
from agl_events.proc.crash import CRASH_ENV
from agl_events.samples.history import StepBatches
from agl_events.samples.model import sample_from_record
from agl_events.samples.step_log import read_steps
from agl_events.samples.steps import SampleRef, account
from agl_events.topics import Topic, topic_name
from tests.algorithm.steps_trainer import GROUP, PROMPTS, STEPS, grpo

pytestmark = pytest.mark.kafka

#: Where each run but the last kills itself (point, step): each restart must go on after the last commit.
KILLS = [("in-transaction", 1), ("committed", 2)]


def _run(settings: Settings, home: Path, crash_at: str | None) -> int | None:
    """One trainer process (and its runners and samples worker, in its process group) to its end; whatever
    of the group a crash left behind is killed with it, as when a machine goes."""
    env = {**os.environ, "AGL_HOME": str(home), "AGL_EXPERIMENT": settings.experiment,
           "AGL_KAFKA_BOOTSTRAP": settings.bootstrap_servers}
    env.pop(CRASH_ENV, None)
    if crash_at is not None:
        env[CRASH_ENV] = crash_at
    trainer = ChildProcess([sys.executable, "-m", "tests.algorithm.steps_trainer"], home / "trainer.log", env=env,
                           own_group=True)
    trainer.start()
    assert trainer.process is not None
    code = trainer.process.wait(300)
    trainer.send(signal.SIGKILL)
    return code


def _samples_on_topic(settings: Settings) -> tuple[list[SampleRef], dict[str, bool]]:
    consumer = make_consumer(settings.bootstrap_servers, None)
    codec, refs, wanted = AvroCodec(), [], {}
    try:
        for raw in read_to_end(consumer, [topic_name(settings.experiment, Topic.SAMPLES)]):
            event = decode_record(codec, raw)
            if event.kind == Kind.SAMPLE_ADDED:
                sample = sample_from_record(event.record)
                refs.append(SampleRef(sample_id=sample.sample_id, partition=raw.partition, offset=raw.offset))
                wanted[sample.sample_id] = sample.mode == "train"
    finally:
        consumer.close()
    return refs, wanted


def test_a_trainer_killed_at_any_point_of_a_step_trains_each_sample_once(settings: Settings, tmp_path: Path) -> None:
    for point, step in KILLS:
        assert _run(settings, tmp_path, f"{point}:{step}") == -signal.SIGKILL, (tmp_path / "trainer.log").read_text()
        assert [r.step for r in read_steps(settings.bootstrap_servers, settings.experiment)] == list(
            range(step + (point == "committed")))  # the step cut off before its commit is not there
    assert _run(settings, tmp_path, None) == 0, (tmp_path / "trainer.log").read_text()[-3000:]

    records = read_steps(settings.bootstrap_servers, settings.experiment)
    assert [(r.step, r.version) for r in records] == [(s, s + 2) for s in range(STEPS)]
    assert all(len(r.trained) == PROMPTS * GROUP for r in records)
    topic, wanted = _samples_on_topic(settings)
    result = account(records, topic, wanted)
    print(f"{len(topic)} samples on the topic ({len(set(wanted))} ids): {len(result.trained)} trained, "
          f"{len(result.dropped)} dropped as stale, {len(result.unconsumed)} not consumed")
    assert result.exactly_once, f"twice {sorted(result.twice)}, missed {sorted(result.missed)}, " \
                                f"unknown {sorted(result.unknown)}"
    assert len(result.trained) == STEPS * PROMPTS * GROUP
    assert result.trained | result.dropped | result.unconsumed == {s for s, train in wanted.items() if train}
    log = (tmp_path / "trainer.log").read_text()
    assert all(f"resuming from weights v{done + 1} ({done} steps done)" in log for done in (1, 3))
    assert "fresh optimiser" not in log
    files = {p.name for p in (tmp_path / "policy" / settings.experiment).iterdir()}
    assert files == {f"v{v}{kind}" for v in range(1, STEPS + 2) for kind in (".pt", ".optimizer.pt")}

    with StepBatches(settings.bootstrap_servers, settings.experiment, AvroCodec()) as batches:
        retrained = grpo().retrain(batches).state_dict()
    published = load_weights(weights_path(tmp_path, settings.experiment, STEPS + 1).as_uri()).state_dict()
    assert retrained.keys() == published.keys() and all(torch.equal(retrained[k], published[k]) for k in published)

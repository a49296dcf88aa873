"""The samples processor against the real broker: the store decides, a KafkaTracer writes the spans, the
worker runs as `agl-events samples` in a child process.

What is checked, and why:
- every finished rollout gives one SampleAdded, keyed by rollout id, built from the spans of the attempt
  the RolloutFinished names (a failed first attempt's spans are not in it), with its group, reward,
  resources and triplets with token ids and logprobs; a rollout cancelled before it ran gives an empty one;
- a rollout the adapter cannot handle goes to the DLQ with the reason in headers, the others are sampled;
- a clean stop and a restart on the same data dir emit nothing again, and lose nothing buffered: spans
  read before the stop make the sample of a rollout that finished while no worker ran; a span that comes
  after its attempt's sample is ignored;
- a worker on an empty data dir (state lost) rebuilds from offset 0 and emits the very same samples again
  (same sample ids, same content): what consumers dedupe by.

Deadlines only bound how long we wait for the worker to catch up; nothing asserts on timing.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from confluent_kafka import Consumer, Message, TopicPartition

from agl_events.config import Settings
from agl_events.emitter import emit_reward
from agl_events.events.codec import AvroCodec
from agl_events.log.writer import EventWriter
from agl_events.processors.background import WorkerProcess, samples_worker
from agl_events.samples.model import Sample, group_id, sample_from_record
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import LAYOUT, Topic, topic_name
from agl_events.tracer import KafkaTracer
from agl_events.types import Claim, RolloutConfig
from tests.eventually import eventually_async
from tests.store import llm, make_span

pytestmark = pytest.mark.kafka

ADAPTER = "tests.samples:TokenTriplets"
DEADLINE = 90.0
CODEC = AvroCodec()
#: Header fields of every event: they differ between two emits of one sample; nothing else may.
EVENT_HEADER = ("event_id", "time", "producer_id")


class Runner:
    """What a runner does with a claimed rollout, in-process: trace LLM calls and a reward, then finish."""

    def __init__(self, store: KafkaLightningStore, tracer: KafkaTracer) -> None:
        self.store = store
        self.tracer = tracer

    async def claim(self, rid: str) -> Claim:
        claim = await self.store.claim_rollout(rid, "runner-1")
        assert claim is not None
        return claim

    def trace(self, claim: Claim, calls: Sequence[tuple[list[int], list[int]]], reward: float | None,
              extra: str | None = None) -> None:
        rollout = claim.rollout
        otel = self.tracer.get_tracer()
        with self.tracer.trace_context(rollout.rollout_id, rollout.attempt.attempt_id, claim.next_sequence_id):
            with otel.start_as_current_span("agent.run"):
                for prompt, response in calls:
                    attributes = {"prompt_token_ids": prompt, "response_token_ids": response,
                                  "logprobs": [-0.5] * len(response)}
                    with otel.start_as_current_span("openai.chat.completion", attributes=attributes):
                        pass
                if extra is not None:
                    otel.start_span(extra).end()
            if reward is not None:
                emit_reward(reward)

    async def finish(self, claim: Claim, status: Literal["succeeded", "failed"] = "succeeded") -> None:
        rollout = claim.rollout
        await self.store.finish_attempt(rollout.rollout_id, rollout.attempt.attempt_id, status,
                                        self.tracer.spans_through())


def _span_partitions(experiment: str) -> list[TopicPartition]:
    [spans] = [spec for spec in LAYOUT if spec.topic == Topic.SPANS]
    return [TopicPartition(topic_name(experiment, Topic.SPANS), p) for p in range(spans.partitions)]


def _read(bootstrap: str, topic: str) -> list[Message]:
    """Every record of `topic` up to its current end, in partition order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "samples-test-reader",
                         "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        found: list[Message] = []
        for partition in sorted(metadata.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            while not found or found[-1].partition() != partition or found[-1].offset() < high - 1:
                message = consumer.poll(5.0)
                assert message is not None, f"{topic}[{partition}] ends at {high}, read {len(found)}"
                assert message.error() is None, message.error()
                found.append(message)
        return found
    finally:
        consumer.close()


def _samples(bootstrap: str, experiment: str) -> list[dict[str, Any]]:
    """The SampleAdded records on the samples topic (key checked: the rollout id)."""
    records = []
    for message in _read(bootstrap, topic_name(experiment, Topic.SAMPLES)):
        decoded = CODEC.decode(message.value())
        assert decoded.name == "SampleAdded" and message.key() == decoded.record["rollout_id"].encode()
        records.append(decoded.record)
    return records


def _by_rollout(records: list[dict[str, Any]]) -> dict[str, Sample]:
    return {r["rollout_id"]: sample_from_record(r) for r in records}


async def _caught_up(worker: WorkerProcess, bootstrap: str, experiment: str) -> dict[str, Any]:
    """The worker's stats once it holds every span partition, each at the end of its log."""
    ends = {}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "samples-test-watermarks"})
    try:
        for tp in _span_partitions(experiment):
            ends[(tp.topic, tp.partition)] = consumer.get_watermark_offsets(tp, timeout=10)[1]
    finally:
        consumer.close()

    async def stats(client: httpx.AsyncClient) -> dict[str, Any] | None:
        assert worker.alive(), f"worker exited ({worker.process.returncode}):\n{worker.tail()}"
        response = await client.get(f"{worker.url}/samples/stats", timeout=5.0)
        return response.json() if response.status_code == 200 else None  # type: ignore[no-any-return]

    def at_the_ends(last: dict[str, Any] | None) -> bool:
        return bool(last) and {(p["topic"], p["partition"]): p["next_offset"] for p in last["partitions"]} == ends

    async with httpx.AsyncClient() as client:
        return await eventually_async(lambda: stats(client), "the samples worker to catch up", within=DEADLINE,
                                      until=at_the_ends, ignoring=(httpx.TransportError,), context=worker.tail)


async def test_samples_once_per_finished_rollout_across_restarts_and_rebuilds(
        settings: Settings, bootstrap: str, tmp_path: Path) -> None:
    experiment = settings.experiment
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "store", scan_debounce_seconds=3600)
    writer = EventWriter(bootstrap, experiment, CODEC, producer_id="runner-1")
    tracer = KafkaTracer(writer)
    runner = Runner(store, tracer)
    try:
        first_resources = (await store.add_resources({"main": llm("a")})).resources_id
        resources = (await store.add_resources({"main": llm("b")})).resources_id
        group = {"data_id": "task-1", "group_size": 2}

        async def enqueue(input: Any, metadata: dict[str, Any] | None = None, **kw: Any) -> str:
            rollout = await store.enqueue_rollout(input=input, mode="train", resources_id=resources,
                                                  metadata=metadata, **kw)
            return rollout.rollout_id

        # Two rollouts of one task (a GRPO group), another task, one the adapter refuses, one retried after
        # a failed first attempt, one cancelled before anyone ran it.
        twins = [await enqueue({"q": "1+1"}, group), await enqueue({"q": "1+1 (again)"}, group)]
        other = await enqueue({"q": "2+2"})
        refused = await enqueue({"q": "?"})
        retried = await enqueue({"q": "3+3"}, config=RolloutConfig(max_attempts=2, retry_condition=["failed"]))
        cancelled = await enqueue({"q": "never"})

        for i, rid in enumerate(twins):
            claim = await runner.claim(rid)
            runner.trace(claim, [([1, 2, 3], [4, 5]), ([1, 2, 3, 4, 5, 6], [7 + i])], reward=0.5 + i)
            await runner.finish(claim)
        claim = await runner.claim(other)
        runner.trace(claim, [([8, 9], [10])], reward=0.25)
        await runner.finish(claim)
        other_attempt = claim.rollout.attempt.attempt_id
        other_next_sequence = claim.next_sequence_id + 3  # agent.run, the call, the reward
        claim = await runner.claim(refused)
        runner.trace(claim, [([1], [2])], reward=1.0, extra="unadaptable")
        await runner.finish(claim)
        refused_attempt = claim.rollout.attempt.attempt_id
        claim = await runner.claim(retried)
        runner.trace(claim, [([66], [66])], reward=None)
        await runner.finish(claim, "failed")  # requeued: no marker yet
        claim = await runner.claim(retried)
        runner.trace(claim, [([3, 3], [6])], reward=1.0)
        await runner.finish(claim)
        retried_attempt = claim.rollout.attempt.attempt_id
        await store.update_rollout(cancelled, status="cancelled")

        with samples_worker(settings, tmp_path / "samples", tmp_path / "worker-a.log", ADAPTER) as first:
            await _caught_up(first, bootstrap, experiment)
            samples = _by_rollout(emitted := _samples(bootstrap, experiment))
            assert len(emitted) == len(samples) == 5 and refused not in samples

            a, b = (samples[rid] for rid in twins)
            assert a.group_id == b.group_id == group_id(None, group, resources) and a.group_size == 2
            assert samples[other].group_id not in (a.group_id, group_id(None, group, first_resources))
            assert (a.final_reward, b.final_reward, samples[other].final_reward) == (0.5, 1.5, 0.25)
            assert [t.prompt["token_ids"] for t in b.triplets] == [[1, 2, 3], [1, 2, 3, 4, 5, 6]]
            assert [t.response["token_ids"] for t in b.triplets] == [[4, 5], [8]]
            assert b.triplets[0].response["logprobs"] == [-0.5, -0.5]
            assert (b.resources_id, b.resources_generation, b.mode, b.status, b.adapter) == \
                (resources, 2, "train", "succeeded", "TokenTriplets")
            assert b.input == {"q": "1+1 (again)"}

            # The second attempt's spans only; its sample id names that attempt.
            retry = samples[retried]
            assert retry.sample_id == f"{retried}:{retried_attempt}" and retry.attempt_id == retried_attempt
            assert [t.prompt["token_ids"] for t in retry.triplets] == [[3, 3]]
            assert (samples[cancelled].attempt_id, samples[cancelled].status, samples[cancelled].triplets) == \
                (None, "cancelled", [])

            [letter] = _read(bootstrap, topic_name(experiment, Topic.DLQ))
            headers = dict(letter.headers() or [])
            assert letter.key() == refused.encode()
            assert headers["agl.source.topic"] == topic_name(experiment, Topic.SPANS).encode()
            assert headers["agl.error.type"] == b"ValueError"
            assert headers["agl.error.message"] == b"cannot adapt span 'unadaptable'"
            marker = CODEC.decode(letter.value())
            assert marker.name == "RolloutFinished" and marker.record["attempt"]["attempt_id"] == refused_attempt

            # A rollout still running when the worker stops; a span for an attempt already sampled.
            pending = await enqueue({"q": "4+4"})
            pending_claim = await runner.claim(pending)
            runner.trace(pending_claim, [([4], [4]), ([4, 4], [8])], reward=0.75)
            await store.add_span(make_span(other, other_attempt, other_next_sequence, name="late"))
            stats = await _caught_up(first, bootstrap, experiment)
            assert stats["counters"]["late_spans"] == 1 and stats["counters"]["dead_lettered"] == 1
            assert sum(p["buffered_spans"] for p in stats["partitions"]) == 4  # the pending rollout's
            assert first.stop(signal.SIGTERM) == 0, first.tail()

        await runner.finish(pending_claim)  # its marker lands while no worker runs
        with samples_worker(settings, tmp_path / "samples", tmp_path / "worker-b.log", ADAPTER) as again:
            stats = await _caught_up(again, bootstrap, experiment)
            after_restart = _samples(bootstrap, experiment)
            [new] = [sample_from_record(r) for r in _added(emitted, after_restart)]  # nothing emitted twice
            assert new.rollout_id == pending
            assert [t.prompt["token_ids"] for t in new.triplets] == [[4], [4, 4]]  # spans read before the stop
            assert new.final_reward == 0.75
            assert stats["counters"]["redelivered"] == 0 and stats["counters"]["dead_lettered"] == 0
            assert again.stop(signal.SIGTERM) == 0, again.tail()

        # State lost: rebuilt from offset 0, every sample again, identical but for the event header.
        with samples_worker(settings, tmp_path / "rebuilt", tmp_path / "worker-c.log", ADAPTER) as rebuilt:
            stats = await _caught_up(rebuilt, bootstrap, experiment)
            assert stats["counters"]["late_spans"] == 1 and stats["counters"]["dead_lettered"] == 1
            copies = _added(after_restart, _samples(bootstrap, experiment))
            assert len(copies) == len(after_restart)
            assert {r["sample_id"]: _content(r) for r in copies} == {r["sample_id"]: _content(r) for r in after_restart}
            assert len(_read(bootstrap, topic_name(experiment, Topic.DLQ))) == 2
    finally:
        tracer.close()
        writer.close()
        await store.close()


def _added(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of `after` that `before` did not have (by event id)."""
    seen = {r["event_id"] for r in before}
    return [r for r in after if r["event_id"] not in seen]


def _content(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in EVENT_HEADER}

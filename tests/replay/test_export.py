"""`replay export` on the real broker: training data read back from an experiment's log.

What is checked, and why:
- a triplet export of a history the real store made (enqueue, start, spans with LLM calls, finish) gives
  exactly the triplets the same adapter gives live over `query_spans(rollout, "latest")`, rollout by rollout;
  an unfinished rollout gives none;
- each filter (mode, min_reward, status, resources, since/until) keeps the rollouts it should, and the rest
  are counted as skipped;
- the messages export gives one row per rollout, the live TraceToMessages records;
- JSONL and Parquet files (several row groups) read back as the rows;
- the samples export reads SampleAdded records once each, a re-emitted sample counted as a duplicate;
- the CLI (a subprocess): exit 0, its summary line, the file; a bad --format or an unknown suffix: exit 2;
- memory: a 100k-span history exported through the CLI peaks at about the RSS of a 10k-span one, so
  memory does not grow with the history (figures printed; nothing timed is asserted).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from agl_events.adapter.messages import TraceToMessages
from agl_events.adapter.triplet import TracerTraceToTriplet
from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.events.convert import attempt_record, rollout_record, span_record
from agl_events.log.admin import create_topics, delete_topics
from agl_events.log.clients import make_admin, make_consumer
from agl_events.log.offsets import partitions_of
from agl_events.log.records import EncodedEvent, event
from agl_events.log.writer import EventWriter
from agl_events.replay.cut import Cut, log_end
from agl_events.replay.export import ExportCounts, ExportFilter, export_rows, write_jsonl, write_parquet
from agl_events.samples.model import Sample, sample_fields, sample_id, triplet_record
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import Topic, topic_name
from agl_events.types import RolloutMode, Span, Triplet
from tests.samples import attempt, rollout
from tests.store import llm, make_span

pytestmark = pytest.mark.kafka

CODEC = AvroCodec()
SUMMARY = re.compile(r"export: (\d+) (\w+) rows to .* from (\d+) rollouts \((\d+) skipped by filter, "
                     r"(\d+) adapter failures")


def _calls(rid: str, aid: str, calls: int, reward: float | None) -> list[Span]:
    """An agent span, `calls` LLM calls under it (token ids, logprobs, chat messages), then a reward span."""
    root = make_span(rid, aid, 1, name="agent.run")
    spans = [root]
    for i in range(calls):
        attributes: dict[str, Any] = {
            "prompt_token_ids": [1, 2, 3 + i], "response_token_ids": [10 + i, 11],
            "logprobs.content": json.dumps([{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -0.25}]),
            "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": f"question {i}",
            "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": f"answer {i}"}
        call = make_span(rid, aid, len(spans) + 1, name="openai.chat.completion", parent_id=root.span_id,
                         trace_id=root.trace_id)
        spans.append(call.model_copy(update={"attributes": attributes}))
    if reward is not None:
        mark = make_span(rid, aid, len(spans) + 1, name="agentlightning.annotation", parent_id=root.span_id,
                         trace_id=root.trace_id)
        spans.append(mark.model_copy(update={"attributes": {"agentlightning.reward.0.name": "primary",
                                                            "agentlightning.reward.0.value": reward}}))
    return spans


@dataclass(frozen=True)
class Plan:
    mode: RolloutMode
    resources: int
    calls: int
    reward: float | None
    status: str


#: In the order they finish: end times grow with the index.
PLANS = [
    Plan("train", 0, 1, 1.0, "succeeded"),
    Plan("train", 0, 2, 0.0, "succeeded"),
    Plan("train", 1, 3, 0.5, "succeeded"),
    Plan("val", 1, 2, 1.0, "succeeded"),
    Plan("val", 0, 1, None, "failed"),
    Plan("train", 1, 2, 0.25, "failed"),
    Plan("train", 1, 0, None, "cancelled"),  # cancelled before anyone ran it: no spans
]


@dataclass
class Story:
    settings: Settings
    resources: list[str]
    rollouts: list[str]  # PLANS' rollout ids, in order
    end_times: list[float]
    live: dict[str, list[dict[str, Any]]]  # rollout id -> the live adapter's triplets, as records
    messages: dict[str, list[Any]]  # rollout id -> TraceToMessages over the live spans
    unfinished: str
    after_third: Cut  # the span topic's end once PLANS[2] had finished


def _span_end(settings: Settings) -> Cut:
    consumer = make_consumer(settings.bootstrap_servers)
    try:
        return log_end(consumer, partitions_of(consumer, [topic_name(settings.experiment, Topic.SPANS)]))
    finally:
        consumer.close()


async def _tell(settings: Settings, view: Path) -> Story:
    store = await KafkaLightningStore.open(settings, view_dir=view, scan_debounce_seconds=3600)
    try:
        resources = [(await store.add_resources({"main": llm(m)})).resources_id for m in ("a", "b")]
        rollouts = []
        for i, plan in enumerate(PLANS):
            rid = (await store.enqueue_rollout(input={"task": i}, mode=plan.mode,
                                               resources_id=resources[plan.resources])).rollout_id
            rollouts.append(rid)
            if plan.status == "cancelled":
                await store.update_rollout(rid, status="cancelled")
                continue
            aid = (await store.start_attempt(rid, "worker-1")).attempt.attempt_id
            await store.add_many_spans(_calls(rid, aid, plan.calls, plan.reward))
            await store.update_attempt(rid, aid, status=plan.status)
            if i == 2:
                after_third = _span_end(settings)
        unfinished = (await store.enqueue_rollout(input={"task": "running"}, mode="train")).rollout_id
        aid = (await store.start_attempt(unfinished, "worker-1")).attempt.attempt_id
        await store.add_many_spans(_calls(unfinished, aid, 2, 1.0))
        end_times, live, messages = [], {}, {}
        for rid in rollouts:
            finished = await store.get_rollout_by_id(rid)
            assert finished is not None and finished.end_time is not None
            end_times.append(finished.end_time)
            spans = list(await store.query_spans(rid, "latest"))
            live[rid] = [triplet_record(t) for t in TracerTraceToTriplet()(spans)] if spans else []
            messages[rid] = TraceToMessages()(spans) if spans else []
        return Story(settings, resources, rollouts, end_times, live, messages, unfinished, after_third)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def story(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    """One history for the module's read-only tests (an experiment of its own, deleted after)."""
    settings = Settings.from_env(experiment=f"t{uuid.uuid4().hex[:10]}", bootstrap=bootstrap)
    try:
        yield asyncio.run(_tell(settings, tmp_path_factory.mktemp("view")))
    finally:
        delete_topics(make_admin(bootstrap), f"agl.{settings.experiment}")


def _by_rollout(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["rollout_id"], []).append(row)
    return grouped


TRIPLET_KEYS = ("prompt_token_ids", "response_token_ids", "response_logprobs", "reward", "prompt_json",
                "response_json", "metadata_json")


def test_triplet_export_gives_the_live_adapters_triplets(story: Story) -> None:
    progress: list[tuple[int, int]] = []
    counts = ExportCounts()
    rows = list(export_rows(story.settings, "triplet", ExportFilter(), counts=counts,
                            progress=lambda done, total: progress.append((done, total))))
    assert len(rows) == sum(len(t) for t in story.live.values()) == sum(p.calls for p in PLANS)
    grouped = _by_rollout(rows)
    assert story.unfinished not in grouped
    for i, (rid, plan) in enumerate(zip(story.rollouts, PLANS, strict=True)):
        exported = grouped.get(rid, [])
        assert [{k: r[k] for k in TRIPLET_KEYS} for r in exported] == story.live[rid]
        assert [r["index"] for r in exported] == list(range(plan.calls))
        for row in exported:
            assert (row["mode"], row["status"], row["resources_id"], row["final_reward"], row["end_time"]) == \
                (plan.mode, plan.status, story.resources[plan.resources], plan.reward, story.end_times[i])
            assert row["response_logprobs"] == [-0.5, -0.25] and row["prompt_token_ids"][:2] == [1, 2]
    assert (counts.rollouts, counts.rows, counts.filtered, counts.failed) == (len(PLANS), len(rows), 0, 0)
    done, total = progress[-1]
    assert done == total == counts.records > 0


def test_filters_keep_what_they_should(story: Story) -> None:
    middle = story.end_times[2]
    cases = [
        (ExportFilter(mode="val"), lambda i, p: p.mode == "val"),
        (ExportFilter(min_reward=0.5), lambda i, p: p.reward is not None and p.reward >= 0.5),
        (ExportFilter(status="failed"), lambda i, p: p.status == "failed"),
        (ExportFilter(resources_id=story.resources[1]), lambda i, p: p.resources == 1),
        (ExportFilter(since=middle), lambda i, p: i >= 2),
        (ExportFilter(until=middle), lambda i, p: i <= 2),
        (ExportFilter(mode="train", min_reward=0.25, status="succeeded"),
         lambda i, p: p.mode == "train" and p.reward is not None and p.reward >= 0.25 and p.status == "succeeded"),
    ]
    for filters, keeps in cases:
        counts = ExportCounts()
        rows = list(export_rows(story.settings, "triplet", filters, counts=counts))
        kept = [i for i, p in enumerate(PLANS) if keeps(i, p)]
        assert set(_by_rollout(rows)) == {story.rollouts[i] for i in kept if PLANS[i].calls}, filters
        assert len(rows) == sum(PLANS[i].calls for i in kept), filters
        assert counts.filtered == len(PLANS) - len(kept), filters


def test_messages_export_gives_a_row_per_rollout(story: Story) -> None:
    rows = list(export_rows(story.settings, "messages", ExportFilter()))
    expected = {rid: records for rid, records in story.messages.items() if records}
    assert {row["rollout_id"]: orjson.loads(row["messages_json"]) for row in rows} == expected
    assert len(rows) == len(expected) == sum(1 for p in PLANS if p.calls)
    first = orjson.loads(rows[0]["messages_json"])[0]["messages"]
    assert first == [{"role": "user", "content": "question 0"}, {"role": "assistant", "content": "answer 0"}]


def test_files_read_back_as_the_rows(story: Story, tmp_path: Path) -> None:
    rows = list(export_rows(story.settings, "triplet", ExportFilter()))
    assert write_jsonl(iter(rows), tmp_path / "t.jsonl") == len(rows)
    assert [orjson.loads(line) for line in (tmp_path / "t.jsonl").read_bytes().splitlines()] == rows
    assert write_parquet(iter(rows), tmp_path / "t.parquet", "triplet", row_group=4) == len(rows)
    assert pq.read_table(tmp_path / "t.parquet").to_pylist() == rows
    assert pq.ParquetFile(tmp_path / "t.parquet").num_row_groups == -(-len(rows) // 4)
    messages = list(export_rows(story.settings, "messages", ExportFilter()))
    assert write_parquet(iter(messages), tmp_path / "m.parquet", "messages") == len(messages)
    assert pq.read_table(tmp_path / "m.parquet").to_pylist() == messages
    assert write_parquet(iter([]), tmp_path / "empty.parquet", "triplet") == 0
    assert pq.read_table(tmp_path / "empty.parquet").num_rows == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.parquet", "m.parquet", "t.jsonl", "t.parquet"]


def test_an_adapter_spec_picks_the_triplet_adapter(story: Story) -> None:
    rows = list(export_rows(story.settings, "triplet", ExportFilter(), adapter_spec="tests.samples:TokenTriplets"))
    assert len(rows) == sum(p.calls for p in PLANS)  # one per span with token ids
    assert {orjson.loads(r["prompt_json"])["raw_content"] for r in rows} == {"openai.chat.completion"}
    with pytest.raises(ValueError, match="no attribute"):
        export_rows(story.settings, "triplet", ExportFilter(), adapter_spec="tests.samples:Nothing")
    with pytest.raises(ValueError, match="triplet export"):
        export_rows(story.settings, "samples", ExportFilter(), adapter_spec="TracerTraceToTriplet")


def _sample(n: int, reward: float) -> Sample:
    rid = f"ro-sample{n}"
    return Sample(sample_id=sample_id(rid, f"at-{n}"), rollout_id=rid, attempt_id=f"at-{n}", group_id=f"g{n % 2}",
                  group_size=2, resources_id="rs-1", resources_generation=1, mode="train", status="succeeded",
                  final_reward=reward, input={"task": n}, adapter="TracerTraceToTriplet",
                  triplets=[Triplet(prompt={"token_ids": [1, n]}, response={"token_ids": [7], "logprobs": [-0.1]},
                                    reward=reward, metadata={"n": n})])


def test_samples_export_reads_each_sample_once(settings: Settings, bootstrap: str) -> None:
    create_topics(make_admin(bootstrap), settings.experiment)
    samples = [_sample(n, reward) for n, reward in enumerate((0.0, 1.0, 0.5))]
    writer = EventWriter(bootstrap, settings.experiment, CODEC, producer_id="samples-test")
    try:
        for batch in (samples, samples[:1]):  # the first sample emitted again, as after a worker's crash
            writer.append_sync([event("SampleAdded", s.rollout_id, 1e9, writer.producer_id, **sample_fields(s))
                                for s in batch])
    finally:
        writer.close()
    counts = ExportCounts()
    rows = list(export_rows(settings, "samples", ExportFilter(), counts=counts))
    assert sorted(r["sample_id"] for r in rows) == sorted(s.sample_id for s in samples)
    assert (counts.rollouts, counts.duplicates, counts.rows) == (3, 1, 3)
    for row in rows:
        [sample] = [s for s in samples if s.sample_id == row["sample_id"]]
        fields = sample_fields(sample)
        assert {k: row[k] for k in fields} == fields and row["time"] == 1e9
    kept = list(export_rows(settings, "samples", ExportFilter(min_reward=0.5)))
    assert sorted(r["final_reward"] for r in kept) == [0.5, 1.0]
    assert list(export_rows(settings, "samples", ExportFilter(until=1e9 - 1))) == []


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", bootstrap, "replay", "export", *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


def test_cli_writes_the_file_and_sums_it_up(story: Story, tmp_path: Path) -> None:
    bootstrap = story.settings.bootstrap_servers
    out = tmp_path / "train.parquet"
    done = _cli(bootstrap, "-e", story.settings.experiment, "--mode", "train", "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = SUMMARY.search(done.stdout)
    assert summary is not None, done.stdout
    train = [i for i, p in enumerate(PLANS) if p.mode == "train"]
    assert summary.groups() == (str(sum(PLANS[i].calls for i in train)), "triplet", str(len(PLANS)),
                                str(len(PLANS) - len(train)), "0")
    assert pq.read_table(out).num_rows == int(summary.group(1))
    assert {r["mode"] for r in pq.read_table(out).to_pylist()} == {"train"}

    since = _cli(bootstrap, "-e", story.settings.experiment, "--adapter", "messages", "--format", "jsonl",
                 "--since", str(story.end_times[3]), "--out", str(tmp_path / "later.data"))
    assert since.returncode == 0, since.stderr
    later = [orjson.loads(line) for line in (tmp_path / "later.data").read_bytes().splitlines()]
    # Rollouts come partition by partition, not in the order they finished.
    assert sorted(r["rollout_id"] for r in later) == sorted(story.rollouts[i] for i in range(3, len(PLANS))
                                                             if PLANS[i].calls)


def test_cli_refuses_a_bad_format(story: Story, tmp_path: Path) -> None:
    bootstrap, experiment = story.settings.bootstrap_servers, story.settings.experiment
    bad = _cli(bootstrap, "-e", experiment, "--format", "xml", "--out", str(tmp_path / "x.xml"))
    assert bad.returncode == 2 and "'xml' is not one of 'jsonl', 'parquet'" in bad.stderr, bad.stderr
    unknown = _cli(bootstrap, "-e", experiment, "--out", str(tmp_path / "x.csv"))
    assert unknown.returncode == 2 and "cannot tell the format from 'x.csv'" in unknown.stderr, unknown.stderr
    missing = _cli(bootstrap, "-e", f"{experiment}-none", "--out", str(tmp_path / "x.jsonl"))
    assert missing.returncode == 1 and "has no topic" in missing.stderr, missing.stderr
    assert list(tmp_path.iterdir()) == []


#: Spans per rollout in the memory test: an agent span, 8 LLM calls, a reward.
CALLS_PER_ROLLOUT = 8


def _produce_history(bootstrap: str, experiment: str, spans: int) -> int:
    """`spans` SpanAdded records, a RolloutFinished after each rollout's, straight to the span topic; returns
    the triplets they make."""
    create_topics(make_admin(bootstrap), experiment)
    template = [span_record(s.model_dump(mode="json")) for s in _calls("ro-x", "at-x", CALLS_PER_ROLLOUT, 1.0)]
    errors: list[object] = []
    writer = EventWriter(bootstrap, experiment, CODEC, producer_id="export-history")
    try:
        for n in range(spans // len(template)):
            rid, aid = f"ro-h{n:07d}", f"at-h{n:07d}"
            batch = [event("SpanAdded", rid, 1e9, writer.producer_id,
                           span={**record, "rollout_id": rid, "attempt_id": aid, "sequence_id": seq})
                     for seq, record in enumerate(template, start=1)]
            batch.append(event("RolloutFinished", rid, 1e9, writer.producer_id, rollout=rollout_record(rollout(rid)),
                               attempt=attempt_record(attempt(rid, aid)), resources_generation=1))
            writer.send([EncodedEvent(new, writer.encode(new)) for new in batch],
                        lambda result: errors.append(result) if isinstance(result, Exception) else None)
    finally:
        writer.close(120)
    assert errors == []
    return spans // len(template) * CALLS_PER_ROLLOUT


def _export_peak_rss(bootstrap: str, experiment: str, out: Path, timeout: float = 300) -> tuple[str, float]:
    """Run the export CLI; its stdout and its peak RSS in MB (its own rusage, from wait4)."""
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen([sys.executable, "-m", "agl_events", "--bootstrap", bootstrap, "replay",
                                    "export", "-e", experiment, "--out", str(out)], stdout=stdout, stderr=stderr)
        ended: list[tuple[int, int, Any]] = []
        waiter = threading.Thread(target=lambda: ended.append(os.wait4(process.pid, 0)), daemon=True)
        waiter.start()
        waiter.join(timeout)
        if not ended:
            process.kill()
            waiter.join()
        _, status, usage = ended[0]
        process.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        assert process.returncode == 0, stderr.read().decode()
        return stdout.read().decode(), usage.ru_maxrss / 1024


def test_memory_does_not_grow_with_the_history(experiment: str, bootstrap: str, tmp_path: Path) -> None:
    figures = {}
    for spans in (10_000, 100_000):
        name = f"{experiment}-{spans}"  # deleted with the experiment's topics
        expected = _produce_history(bootstrap, name, spans)
        output, peak = _export_peak_rss(bootstrap, name, tmp_path / f"{spans}.parquet")
        summary = SUMMARY.search(output)
        assert summary is not None, output
        assert int(summary.group(1)) == expected == pq.ParquetFile(tmp_path / f"{spans}.parquet").metadata.num_rows
        figures[spans] = peak
        print(f"export of {spans:,} spans ({expected:,} triplets): peak RSS {peak:.0f} MB; {output.strip()}")
    assert figures[100_000] < figures[10_000] + 150, figures


def test_a_cut_bounds_what_is_read(story: Story) -> None:
    """Up to the span topic's end as it was when the third rollout had finished: those three only; a cut
    naming partitions of other topics reads nothing of theirs and still ends."""
    rows = list(export_rows(story.settings, "triplet", ExportFilter(), cut=story.after_third))
    assert set(_by_rollout(rows)) == set(story.rollouts[:3])
    other = Cut(ends={f"agl.{story.settings.experiment}.rollouts/0": 10**9}, why="another topic")
    assert list(export_rows(story.settings, "triplet", ExportFilter(), cut=other)) == []

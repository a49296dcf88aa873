"""Experiments read from the broker: events, record times, sizes and model versions of what a store wrote; deletion."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import datetime
from pathlib import Path

import pytest

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topic
from agl_events.log.clients import make_admin
from agl_events.log.experiments import (
    ExperimentSummary,
    UnknownExperimentError,
    delete_experiment,
    describe_experiment,
    experiment_of,
    list_experiments,
)
from agl_events.log.log_dirs import partition_sizes
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import DAY_MS, LAYOUT, Topic, topic_name
from tests.store import llm


def _write(settings: Settings, view_dir: Path) -> tuple[float, float, str]:
    """Three rollouts, two resources ids and an update of the first; (before, after, the id updated last)."""
    async def run() -> str:
        store = await KafkaLightningStore.open(settings, view_dir=view_dir)
        try:
            for i in range(3):
                await store.enqueue_rollout({"i": i})
            first = await store.add_resources({"main": llm("a")})
            await store.add_resources({"main": llm("b")})
            return (await store.update_resources(first.resources_id, {"main": llm("c")})).resources_id
        finally:
            await store.close()

    before = time.time()
    latest = asyncio.run(run())
    return before, time.time(), latest


def _records(summary: ExperimentSummary) -> dict[str, int]:
    return {t.name.rpartition(".")[2]: t.records for t in summary.topics}


def _between(when: datetime | None, before: float, after: float) -> bool:
    """Record timestamps are the producer's clock in whole milliseconds."""
    return when is not None and math.floor(before * 1000) / 1000 <= when.timestamp() <= after


@pytest.mark.kafka
def test_a_store_s_experiment_is_described_with_its_events_times_sizes_and_model_versions(
        settings: Settings, tmp_path: Path) -> None:
    before, after, latest = _write(settings, tmp_path / "view")
    summary = describe_experiment(settings.bootstrap_servers, AvroCodec(), settings.experiment)

    assert summary.name == settings.experiment and summary.topic_count == len(LAYOUT)
    assert summary.partitions == sum(spec.partitions for spec in LAYOUT)
    records = _records(summary)
    assert records[Topic.ROLLOUTS] == 3 and records[Topic.TASKS] == 3  # enqueued, and dispatched to runners
    assert records[Topic.RESOURCES] == 3  # two published, one updated
    assert summary.events == sum(records.values())
    assert summary.model_versions == 2 and summary.latest_resources_id == latest
    assert _between(summary.first_time, before, after) and _between(summary.last_time, before, after)
    assert summary.first_time is not None and summary.last_time is not None
    assert summary.first_time <= summary.last_time
    for topic in summary.topics:  # each partition's offsets and bytes as the broker has them
        assert all(p.start == 0 and p.records == p.end for p in topic.partitions)
        assert topic.size_bytes is not None and (topic.size_bytes > 0) == (topic.records > 0)
        assert (topic.first_time is None) == (topic.records == 0)
    assert summary.size_bytes == sum(t.size_bytes or 0 for t in summary.topics)
    by_suffix = {t.name.rpartition(".")[2]: t for t in summary.topics}
    assert by_suffix[Topic.RESOURCES].cleanup_policy == "compact" and by_suffix[Topic.RESOURCES].retention_ms == -1
    assert by_suffix[Topic.WORKERS].cleanup_policy == "delete" and by_suffix[Topic.WORKERS].retention_ms == 7 * DAY_MS

    listed = {s.name: s for s in list_experiments(settings.bootstrap_servers, AvroCodec())}
    assert settings.experiment in listed
    mine = listed[settings.experiment]
    assert (mine.events, mine.model_versions, mine.latest_resources_id, mine.size_bytes) == (
        summary.events, 2, latest, summary.size_bytes)
    assert mine.topics[0].cleanup_policy is None  # topic settings are asked for by describe only


@pytest.mark.kafka
def test_an_experiment_is_any_topic_of_its_layout(bootstrap: str, experiment: str) -> None:
    admin = make_admin(bootstrap)
    name = topic_name(experiment, Topic.SPANS)
    create_topic(admin, name, 2)  # waits for its leaders: a topic just created is not listed at once
    summary = describe_experiment(bootstrap, AvroCodec(), experiment)
    assert [t.name for t in summary.topics] == [name] and summary.partitions == 2
    assert (summary.events, summary.model_versions, summary.first_time) == (0, 0, None)


@pytest.mark.kafka
def test_an_unknown_experiment_raises(bootstrap: str, experiment: str) -> None:
    with pytest.raises(UnknownExperimentError, match=experiment):
        describe_experiment(bootstrap, AvroCodec(), experiment)


@pytest.mark.kafka
def test_delete_removes_the_topics_and_the_view_folder(settings: Settings, tmp_path: Path) -> None:
    views = tmp_path / "views"
    _write(settings, views / settings.experiment)
    deleted = delete_experiment(settings.bootstrap_servers, settings.experiment, views)
    assert sorted(deleted.topics) == sorted(spec.name(settings.experiment) for spec in LAYOUT)
    assert deleted.views == views / settings.experiment and not deleted.views.exists()
    left = make_admin(settings.bootstrap_servers).list_topics(timeout=10).topics
    assert not [t for t in left if t.startswith(f"agl.{settings.experiment}.")]
    with pytest.raises(UnknownExperimentError):
        describe_experiment(settings.bootstrap_servers, AvroCodec(), settings.experiment)


def test_topic_names_belong_to_the_experiment_between_agl_and_a_layout_suffix() -> None:
    assert experiment_of("agl.exp-1.spans") == "exp-1"
    assert experiment_of("agl.exp.task-requests") == "exp"
    assert experiment_of("agl.exp.unknown") is None
    assert experiment_of("agl.a.b.spans") is None
    assert experiment_of("other.exp.spans") is None


def test_sizes_are_unknown_when_the_cluster_does_not_answer() -> None:
    assert partition_sizes("127.0.0.1:1", [("agl.x.spans", 0)], timeout=2.0) == {}

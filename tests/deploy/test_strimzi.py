"""KafkaTopic resources rendered from the topic layout: the committed base file is a fresh render, every
topic keeps its partitions and settings, and replication is the cluster's unless asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from agl_events.deploy.strimzi import BASE_TOPICS_FILE, TopicOptions, render_topics, resource_name
from agl_events.topics import LAYOUT

REPO = Path(__file__).resolve().parents[2]


def _topics(text: str) -> dict[str, dict]:
    return {doc["spec"]["topicName"]: doc for doc in yaml.safe_load_all(text)}


def test_the_committed_base_topics_are_a_fresh_render_of_the_layout() -> None:
    committed = (REPO / BASE_TOPICS_FILE).read_text()
    assert committed == render_topics(TopicOptions()), (
        f"{BASE_TOPICS_FILE} drifted from agl_events/topics.py: run `agl-events k8s topics --out {BASE_TOPICS_FILE}`")


def test_every_topic_keeps_its_partitions_and_settings_and_replication_is_the_clusters() -> None:
    topics = _topics(render_topics(TopicOptions(experiment="exp1", cluster="kafka1")))
    assert set(topics) == {spec.name("exp1") for spec in LAYOUT}
    for spec in LAYOUT:
        topic = topics[spec.name("exp1")]
        assert topic["apiVersion"] == "kafka.strimzi.io/v1" and topic["kind"] == "KafkaTopic"
        assert topic["metadata"]["labels"]["strimzi.io/cluster"] == "kafka1"
        assert topic["spec"]["partitions"] == spec.partitions
        assert topic["spec"]["config"] == spec.settings
        assert "replicas" not in topic["spec"]  # default.replication.factor and min.insync.replicas of the overlay


@pytest.mark.parametrize(("replicas", "asked", "insync"), [(1, None, "1"), (2, None, "1"), (3, None, "2"),
                                                          (5, None, "2"), (3, 3, "3")])
def test_replicas_set_min_insync_replicas(replicas: int, asked: int | None, insync: str) -> None:
    topics = _topics(render_topics(TopicOptions(replicas=replicas, min_insync_replicas=asked)))
    assert {(t["spec"]["replicas"], t["spec"]["config"]["min.insync.replicas"]) for t in topics.values()} == {
        (replicas, insync)}


@pytest.mark.parametrize(("replicas", "insync"), [(None, 2), (2, 3)])
def test_min_insync_replicas_needs_enough_replicas(replicas: int | None, insync: int) -> None:
    with pytest.raises(ValidationError, match=r"min\.insync\.replicas needs --replicas"):
        TopicOptions(replicas=replicas, min_insync_replicas=insync)


def test_topic_names_kubernetes_refuses_become_valid_object_names() -> None:
    topic = next(iter(_topics(render_topics(TopicOptions(experiment="My_Exp"))).values()))
    assert topic["spec"]["topicName"] == "agl.My_Exp.rollouts"
    assert topic["metadata"]["name"] == resource_name("agl.My_Exp.rollouts") == "agl.my-exp.rollouts"
    assert topic["metadata"]["labels"]["agl-events/experiment"] == "my-exp"


def test_the_command_writes_the_rendering_its_header_names(tmp_path: Path) -> None:
    out = tmp_path / "topics.yaml"
    done = subprocess.run([sys.executable, "-m", "agl_events", "--experiment", "exp2", "k8s", "topics",
                           "--replicas", "3", "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text == render_topics(TopicOptions(experiment="exp2", replicas=3))
    assert text.splitlines()[0].endswith("`agl-events --experiment exp2 k8s topics --cluster agl --replicas 3`.")
    refused = subprocess.run([sys.executable, "-m", "agl_events", "k8s", "topics", "--min-insync-replicas", "2"],
                             capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert refused.returncode == 2 and "min.insync.replicas needs --replicas" in refused.stderr

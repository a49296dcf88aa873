"""Strimzi `KafkaTopic` resources rendered from the topic layout, so a Kubernetes cluster creates exactly
the topics `agl-events topics create` would: one source of truth (`agl_events.topics`) for names,
partitions and settings. Pure: YAML text out, no Kafka client (the CLI in `cli/k8s.py` writes it).

The committed `deploy/k8s/base/topics.yaml` is this module's output for the defaults; a test renders it
again and compares, so the manifests cannot drift from the layout.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from pydantic import BaseModel, Field, model_validator

from agl_events.topics import LAYOUT, TopicSpec

#: The Strimzi API the resources are written for (Strimzi 1.x serves only v1; see deploy/k8s/schemas/SOURCES.md).
STRIMZI_API = "kafka.strimzi.io/v1"
#: The name of the `Kafka` resource in deploy/k8s/base: its bootstrap service is `<cluster>-kafka-bootstrap`.
DEFAULT_CLUSTER = "agl"
#: Where the committed rendering lives, relative to the repository root.
BASE_TOPICS_FILE = "deploy/k8s/base/topics.yaml"
_NOT_IN_NAME = re.compile(r"[^a-z0-9.-]+")


class TopicOptions(BaseModel):
    """What a rendering is for. Without `replicas` a topic takes the cluster's `default.replication.factor`
    and `min.insync.replicas` (set per overlay on the `Kafka` resource), as `topics create` does with -1."""

    experiment: str = "default"
    cluster: str = DEFAULT_CLUSTER
    replicas: int | None = Field(default=None, ge=1)
    min_insync_replicas: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _insync_within_replicas(self) -> TopicOptions:
        if self.min_insync_replicas is not None and (self.replicas is None or self.min_insync_replicas > self.replicas):
            raise ValueError("min.insync.replicas needs --replicas, and cannot exceed it")
        return self

    @property
    def min_insync(self) -> int | None:
        """Explicit, or derived from `replicas`: one broker may be down while acks=all writes still reach two
        (3 -> 2, 1 -> 1; never above 2, which would stop writes when two of five brokers are down)."""
        if self.min_insync_replicas is not None or self.replicas is None:
            return self.min_insync_replicas
        return max(1, min(2, self.replicas - 1))

    def command(self) -> str:
        """The command line that renders these options (written into the file's header)."""
        words = ["agl-events", "--experiment", self.experiment, "k8s", "topics", "--cluster", self.cluster]
        if self.replicas is not None:
            words += ["--replicas", str(self.replicas)]
        if self.min_insync_replicas is not None:
            words += ["--min-insync-replicas", str(self.min_insync_replicas)]
        return " ".join(words)


def resource_name(topic: str) -> str:
    """A Kubernetes object name (RFC 1123 subdomain) for a topic: experiment names may hold `_` or capitals,
    which Kafka allows and Kubernetes does not; the real name is in `spec.topicName`. (Two experiments that
    differ only there, `a_b` and `a-b`, would share names: keep such pairs in different namespaces.)"""
    return _NOT_IN_NAME.sub("-", topic.lower()).strip("-.")[:253]


def kafka_topic(spec: TopicSpec, options: TopicOptions) -> dict[str, Any]:
    """One `KafkaTopic`: the layout's partitions and settings, the replication the options ask for."""
    name = spec.name(options.experiment)
    config: dict[str, str] = dict(spec.settings)
    if (insync := options.min_insync) is not None:
        config["min.insync.replicas"] = str(insync)
    body: dict[str, Any] = {"topicName": name, "partitions": spec.partitions}
    if options.replicas is not None:
        body["replicas"] = options.replicas
    body["config"] = config
    return {
        "apiVersion": STRIMZI_API,
        "kind": "KafkaTopic",
        "metadata": {
            "name": resource_name(name),
            "labels": {"strimzi.io/cluster": options.cluster, "app.kubernetes.io/part-of": "agl-events",
                       "agl-events/experiment": resource_name(options.experiment)[:63].rstrip("-.")},
            "annotations": {"agl-events/key": spec.key, "agl-events/why": spec.why},
        },
        "spec": body,
    }


def render_topics(options: TopicOptions) -> str:
    """Every topic of the experiment as a multi-document YAML file, with a header saying how to regenerate it."""
    header = (f"# Generated from agl_events/topics.py by `{options.command()}`.\n"
              "# Do not edit: change the layout and render again (a test compares this file with a fresh render).\n")
    docs = [kafka_topic(spec, options) for spec in LAYOUT]
    return header + yaml.safe_dump_all(docs, sort_keys=False, width=120, explicit_start=True)

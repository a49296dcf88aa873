"""deploy/k8s, validated offline: every overlay renders and passes kubeconform -strict against the committed
Kubernetes and Strimzi schemas (and a wrong manifest does not), every agl-events command in a container parses
with the real CLI, and the overlays say what they promise (one node in dev; 3+3 nodes, replication 3 and
min.insync.replicas 2, 3 stores, budgets and anti-affinity in prod)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import K8S, OVERLAYS

Resources = list[dict[str, Any]]


def _check(*targets: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([K8S / "check.sh", *targets], capture_output=True, text=True, timeout=120)


def _one(resources: Resources, kind: str, name: str) -> dict[str, Any]:
    [found] = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


def _containers(resources: Resources) -> Iterator[tuple[str, dict[str, Any]]]:
    for r in resources:
        spec = r.get("spec", {})
        pod = spec.get("jobTemplate", spec).get("template", {}).get("spec")
        for container in (pod or {}).get("containers", []):
            yield f"{r['kind']}/{r['metadata']['name']}", container


def _cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    """The real CLI on `args` plus --help: the commands and options are parsed (an unknown one is exit status 2),
    then help ends it before anything runs or a mounted file is looked for."""
    return subprocess.run([sys.executable, "-m", "agl_events", *args, "--help"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_passes_strict_validation(overlay: str, tools: Path) -> None:
    done = _check(K8S / "overlays" / overlay)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Invalid: 0, Errors: 0, Skipped: 0" in done.stdout


def test_wrong_manifests_are_rejected(tools: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("""\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: agl-store}
spec:
  replicas: three
  selector: {matchLabels: {app: a}}
  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: i}]}}
---
apiVersion: kafka.strimzi.io/v1
kind: Kafka
metadata: {name: agl}
spec:
  kafka:
    listeners: [{name: plain, port: 9092, type: internal, tls: false}]
    replicas: 3
---
apiVersion: kafka.strimzi.io/v1
kind: KafkaTopic
metadata: {name: t}
spec: {partitions: "3"}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: i}]}
""")
    done = _check(wrong)
    assert done.returncode == 1
    assert "at '/spec/replicas': got string, want integer" in done.stdout
    assert "at '/spec/kafka': additional properties 'replicas' not allowed" in done.stdout
    assert "KafkaTopic t is invalid" in done.stdout
    assert "could not find schema for Pod" in done.stdout  # a kind without a schema is not waved through
    assert "Valid: 0, Invalid: 3, Errors: 1" in done.stdout


def test_every_agl_events_command_in_a_container_is_one_the_cli_takes(rendered: dict[str, Resources]) -> None:
    commands = {tuple(c["args"]) for resources in rendered.values() for _, c in _containers(resources)
                if c.get("command") == ["agl-events"]}
    assert {next(a for a in args if a in ("store", "processor", "samples", "runner", "proxy")) for args in commands
            } == {"store", "processor", "samples", "runner", "proxy"}
    for args in sorted(commands):
        done = _cli(list(args))
        assert done.returncode == 0, f"agl-events {' '.join(args)}: {done.stderr}"
    drifted = _cli(["--home", "/var/lib/agl", "store", "--prot", "4747"])
    assert drifted.returncode == 2 and "No such option: --prot" in drifted.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pieces_point_at_each_other(overlay: str, rendered: dict[str, Resources]) -> None:
    resources = rendered[overlay]
    kafka = _one(resources, "Kafka", "agl")
    assert kafka["metadata"]["annotations"] == {"strimzi.io/node-pools": "enabled", "strimzi.io/kraft": "enabled"}
    [plain] = [listener for listener in kafka["spec"]["kafka"]["listeners"] if not listener["tls"]]
    settings = _one(resources, "ConfigMap", "agl-events")["data"]
    assert settings["AGL_KAFKA_BOOTSTRAP"] == f"agl-kafka-bootstrap:{plain['port']}"
    pools = [r for r in resources if r["kind"] == "KafkaNodePool"]
    topics = [r for r in resources if r["kind"] == "KafkaTopic"]
    assert {r["metadata"]["labels"]["strimzi.io/cluster"] for r in pools + topics} == {"agl"}
    assert {t["spec"]["topicName"].split(".")[1] for t in topics} == {settings["AGL_EXPERIMENT"]}
    store = _one(resources, "StatefulSet", "agl-store")
    [container] = store["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    headless = _one(resources, "Service", store["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert env["AGL_STORE_ADVERTISE_URL"]["value"] == f"http://$(POD_NAME).{headless['metadata']['name']}:4747"
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    front = _one(resources, "Service", "agl-store")
    assert front["spec"]["selector"].items() <= store["spec"]["template"]["metadata"]["labels"].items()
    for name in ("agl-store", "agl-processor", "agl-samples"):  # RocksDB under --home, on the pod's own volume
        sts = _one(resources, "StatefulSet", name)
        [container] = sts["spec"]["template"]["spec"]["containers"]
        home = container["args"][container["args"].index("--home") + 1]
        assert {"name": "data", "mountPath": home} in container["volumeMounts"]
        assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["data"]
    for where, container in _containers(resources):
        if "--store-url" in container.get("args", []):
            assert container["args"][container["args"].index("--store-url") + 1] == "http://agl-store:4747", where


def test_dev_is_one_kafka_node_and_one_of_everything(rendered: dict[str, Resources]) -> None:
    resources = rendered["dev"]
    [pool] = [r for r in resources if r["kind"] == "KafkaNodePool"]
    assert pool["spec"]["replicas"] == 1 and set(pool["spec"]["roles"]) == {"controller", "broker"}
    assert pool["spec"]["storage"]["type"] == "ephemeral"
    assert {r["spec"]["replicas"] for r in resources if r["kind"] in ("StatefulSet", "Deployment")} == {1}
    assert _one(resources, "Kafka", "agl")["spec"]["kafka"]["config"]["default.replication.factor"] == 1


def test_prod_replicates_three_times_and_keeps_enough_up(rendered: dict[str, Resources]) -> None:
    resources = rendered["prod"]
    pools = {tuple(r["spec"]["roles"]): r["spec"]["replicas"] for r in resources if r["kind"] == "KafkaNodePool"}
    assert pools == {("controller",): 3, ("broker",): 3}
    config = _one(resources, "Kafka", "agl")["spec"]["kafka"]["config"]
    assert config["default.replication.factor"] == 3 and config["min.insync.replicas"] == 2
    assert config["offsets.topic.replication.factor"] == config["share.coordinator.state.topic.replication.factor"] == 3
    assert _one(resources, "StatefulSet", "agl-store")["spec"]["replicas"] == 3
    budgets = {r["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] for r in resources
               if r["kind"] == "PodDisruptionBudget"}
    assert budgets == {"agl-store", "agl-processor", "agl-samples", "agl-proxy", "agl-runner"}
    for where, container in _containers(resources):
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"], where
    for name in ("agl-store", "agl-processor"):
        assert "podAntiAffinity" in _one(resources, "StatefulSet", name)["spec"]["template"]["spec"]["affinity"]
    assert "replicas" not in _one(resources, "Deployment", "agl-runner")["spec"]  # the autoscaler's
    assert _one(resources, "HorizontalPodAutoscaler", "agl-runner")["spec"]["scaleTargetRef"]["name"] == "agl-runner"


def test_a_training_run_takes_the_stores_place(rendered: dict[str, Resources]) -> None:
    resources = rendered["dev-train"]
    assert _one(resources, "StatefulSet", "agl-store")["spec"]["replicas"] == 0  # one decider per experiment
    trainer = _one(resources, "Job", "agl-trainer")["spec"]["template"]["metadata"]["labels"]
    assert _one(resources, "Service", "agl-store")["spec"]["selector"].items() <= trainer.items()

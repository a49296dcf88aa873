"""A local 3-node cluster (`agl-events kafka start --brokers 3`) of the module's own, on free ports in a tmp home,
shared by its tests and stopped at the end: the replication the topic layout chooses for it, and a short chaos run
on it (a SIGKILL of the busiest partitions' leader and a rolling restart of all three nodes) in which nothing is
lost or doubled and no client sees an error. `agl-events chaos --brokers 3` runs the long ones."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agl_events.broker.cluster import LocalCluster, free_cluster_ports
from agl_events.broker.local import local_cluster
from agl_events.chaos.run import ChaosConfig, run_chaos
from agl_events.cli.main import app
from agl_events.config import Settings
from agl_events.log.admin import broker_ids, create_topic, create_topics, replication_of
from agl_events.log.clients import make_admin
from agl_events.topics import LAYOUT, Replication, Topic, topic_name
from tests.eventually import eventually

pytestmark = [pytest.mark.kafka, pytest.mark.cluster,
              pytest.mark.skipif(shutil.which("java") is None, reason="the local Kafka cluster needs Java 17+")]

#: Not 150: that run took 265 s (2026-12-06, two busy cores), most of it workload before the leader kill (due at a
#: third) and after the rolling restart (due at half), at about 0.65 rollouts a second. With 100 the rolling
#: restart still begins with a third of them to go or more (the plan feeds 12 or 13 in right before each action:
#: `chaos.plan`), which last about as long as the restart itself.
ROLLOUTS = 100
#: Slower agents than the default's 0.05 s a step: the run's broker actions block its loop (a node's restart takes
#: 15-35 s on two busy cores), so quick rollouts would all be done before the rolling restart began; at 0.5 s
#: a step the workload lasts about as long as the actions, and the run no longer.
STEP_SECONDS = 0.5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    port, controller_port = free_cluster_ports(3)
    settings = Settings(home=tmp_path_factory.mktemp("cluster-home"), local_port=port,
                        local_controller_port=controller_port)
    managed = local_cluster(settings, 3)
    try:
        managed.start(timeout=120)
        yield managed
    finally:  # SIGKILLed: stopped at once, the three nodes waited out the 20 s stop timeout, for a cluster thrown away
        for node in managed.nodes:
            node.kill()


def test_topics_get_replication_three_with_two_in_sync_and_existing_ones_are_left_as_they_are(
        cluster: LocalCluster) -> None:
    admin = make_admin(cluster.bootstrap)
    assert broker_ids(admin) == {1, 2, 3}
    create_topic(admin, topic_name("older", Topic.ROLLOUTS), 3, replication_factor=1)  # made on a smaller cluster

    created = create_topics(admin, "older")

    names = [spec.name("older") for spec in LAYOUT]
    rollouts = topic_name("older", Topic.ROLLOUTS)
    assert created[rollouts].startswith("exists with replication 1, min.insync.replicas 1 (replication 3, "
                                         "min.insync.replicas 2 wanted")
    assert {created[n] for n in names if n != rollouts} == {"created"}
    # each broker learns of a new topic a moment apart, and a metadata request goes to any of them: the one
    # asked may not list the topics the controller has just created yet (seen once on a fresh clone)
    found = eventually(lambda: replication_of(admin, names), "every topic in the asked broker's metadata",
                       until=lambda found: set(found) == set(names))
    assert found[rollouts] == Replication(factor=1, min_insync=1)
    assert {found[n] for n in names if n != rollouts} == {Replication(factor=3, min_insync=2)}

    create_topics(admin, "chosen", replication=Replication(factor=2, min_insync=1))  # an experiment's override
    chosen = [s.name("chosen") for s in LAYOUT]
    found = eventually(lambda: replication_of(admin, chosen), "every chosen topic in the asked broker's metadata",
                       until=lambda found: set(found) == set(chosen))
    assert set(found.values()) == {Replication(factor=2, min_insync=1)}

    env = {"AGL_HOME": str(cluster.settings.home), "AGL_KAFKA_PORT": str(cluster.settings.local_port),
           "AGL_KAFKA_CONTROLLER_PORT": str(cluster.settings.local_controller_port), "AGL_KAFKA_BOOTSTRAP": None,
           "COLUMNS": "250"}
    described = CliRunner().invoke(app, ["--experiment", "older", "topics", "describe"], env=env)
    assert described.exit_code == 0, described.output
    assert "replication 3, min.insync.replicas 2 for this cluster" in described.output
    assert "1 (min.insync 1), 3/2 wanted" in described.output and "3 (min.insync 2)" in described.output
    status = CliRunner().invoke(app, ["kafka", "status"], env=env)  # the home's size is known: every node
    assert status.exit_code == 0, status.output
    assert "local cluster of 3 nodes" in status.output and status.output.count("running (pid") == 3
    logs = CliRunner().invoke(app, ["kafka", "logs", "-n", "1"], env=env)
    assert logs.exit_code == 0, logs.output
    assert [line.split(" | ")[0] for line in logs.output.splitlines()] == ["node-1", "node-2", "node-3"]


def test_nothing_is_lost_and_no_client_sees_an_error_through_a_leader_kill_and_a_rolling_restart(
        cluster: LocalCluster, tmp_path: Path) -> None:
    lines: list[str] = []
    config = ChaosConfig(rollouts=ROLLOUTS, runners=3, kills=0, broker_restarts=0, brokers=3, leader_kills=1,
                         rolling_restart=True, step_seconds=STEP_SECONDS, home=tmp_path / "chaos")
    report = run_chaos(config, say=lines.append, cluster=cluster)
    print("\n".join(lines), json.dumps(report.model_dump()), sep="\n")
    assert report.problems == []
    assert (report.rollouts, report.lost, report.duplicated, report.non_terminal, report.gaps) == (ROLLOUTS, 0, 0, 0, 0)
    assert report.leader_kills == 1 and report.rolling_restarts == 1
    assert report.failovers[0].first_seconds is not None  # appends were acknowledged again on its partitions
    assert (report.client_errors, report.api_errors, report.attempts_not_succeeded) == (0, 0, 0)
    assert report.restarts_after_crash == {}
    assert report.rebuild_equal and report.processor_equal and report.ok
    assert report.statuses == {"succeeded": ROLLOUTS}

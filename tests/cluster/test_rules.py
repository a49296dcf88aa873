"""The rules a local cluster and its chaos runs follow, without starting one: replication for the cluster met,
where each node listens, which plans a cluster run accepts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from agl_events.broker.cluster import node_layout
from agl_events.broker.home import BrokerHome, Node
from agl_events.chaos.plan import plan
from agl_events.chaos.run import ChaosConfig
from agl_events.config import Settings
from agl_events.topics import Replication, replication_for


@pytest.mark.parametrize(("brokers", "factor", "min_insync"), [(1, 1, 1), (2, 2, 1), (3, 3, 2), (5, 3, 2)])
def test_replication_is_min_of_three_and_the_brokers_with_one_copy_to_spare(brokers: int, factor: int,
                                                                             min_insync: int) -> None:
    assert replication_for(brokers) == Replication(factor=factor, min_insync=min_insync)


def test_a_replication_no_write_could_meet_is_refused() -> None:
    with pytest.raises(ValidationError, match="exceeds the replication factor"):
        Replication(factor=1, min_insync=2)


def test_nodes_take_every_other_port_from_the_configured_ones_and_know_all_voters(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, local_port=9092, local_controller_port=9093)
    layout = node_layout(settings, 3)
    assert layout == (Node(1, 9092, 9093), Node(2, 9094, 9095), Node(3, 9096, 9097))
    home = BrokerHome(settings, layout[1], layout, {"broker.session.timeout.ms": "4000"})
    home.kafka_dir.mkdir(parents=True)
    home.write_properties()
    text = home.properties_file.read_text()
    assert home.kafka_dir == tmp_path.absolute() / "kafka" / "node-2"
    assert "node.id=2\n" in text and "listeners=PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095" in text
    assert "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097" in text
    assert "offsets.topic.replication.factor=3\n" in text and "min.insync.replicas=2\n" in text
    assert text.rstrip().endswith("broker.session.timeout.ms=4000")  # extra properties come last: they win


def test_the_single_broker_keeps_its_standalone_quorum(tmp_path: Path) -> None:
    home = BrokerHome(Settings(home=tmp_path, local_port=9092, local_controller_port=9093))
    home.kafka_dir.mkdir(parents=True)
    home.write_properties()
    text = home.properties_file.read_text()
    assert home.kafka_dir == tmp_path.absolute() / "kafka" and home.standalone
    assert "controller.quorum.bootstrap.servers=127.0.0.1:9093\n" in text and "\ncontroller.quorum.voters=" not in text
    assert "offsets.topic.replication.factor=1\n" in text and "min.insync.replicas=1\n" in text


def test_a_dead_member_s_partitions_move_within_seconds_on_the_local_broker(tmp_path: Path) -> None:
    """A store group's consumer group and the runners' share group hand a SIGKILLed member's partitions to the
    others once its session times out: 6 s on the local broker, 45 s by Kafka's defaults (a rollout retried after
    its runner's SIGKILL waited 46-49 s for another runner in tests/runner's kill test; 7 s with 6 s here)."""
    home = BrokerHome(Settings(home=tmp_path, local_port=9092, local_controller_port=9093))
    home.kafka_dir.mkdir(parents=True)
    home.write_properties()
    lines = [line for line in home.properties_file.read_text().splitlines() if line and not line.startswith("#")]
    rendered = dict(line.split("=", 1) for line in lines)
    for group in ("consumer", "share"):
        timeouts = {rendered.get(f"group.{group}.{name}.timeout.ms") for name in ("session", "min.session")}
        assert timeouts == {"6000"}, group
        assert rendered.get(f"group.{group}.heartbeat.interval.ms") == "1000", group


def test_a_cluster_run_plans_leader_kills_and_one_rolling_restart_and_refuses_what_needs_another_size(
        tmp_path: Path) -> None:
    config = ChaosConfig(rollouts=10, kills=0, broker_restarts=0, brokers=3, leader_kills=3, rolling_restart=True,
                         home=tmp_path)
    assert [step.action for step in plan(config, random.Random(0)).steps] == ["leader", "leader", "rolling", "leader"]
    assert config.clients_must_see_nothing
    with pytest.raises(ValidationError, match="need a cluster"):
        ChaosConfig(leader_kills=1, broker_restarts=0, home=tmp_path)
    with pytest.raises(ValidationError, match="node by node"):
        ChaosConfig(brokers=3, home=tmp_path)

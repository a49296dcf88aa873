"""The embedded default broker, exercised against a real Kafka process.

Each broker here gets its own temporary AGL_HOME and free ports, so these tests never touch the
broker a test session may already run on 9092 with `<repo>/.agl`. One broker is started for the
whole module (a start costs seconds) and the tests that need it run in file order: start, use,
stop, restart.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from typer.testing import CliRunner

from agl_events.broker import BrokerError, BrokerStatus, LocalBroker, ensure_broker, home
from agl_events.broker.reach import KafkaUnreachableError
from agl_events.cli.main import app
from agl_events.config import Settings
from agl_events.log.admin import create_topic
from agl_events.log.clients import make_admin
from agl_events.log.consumer import GroupConsumer, Start
from agl_events.proc.ports import free_port
from tests.eventually import eventually

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="the local Kafka broker needs Java 17+")


def _settings(home: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "home": home,
        "local_port": free_port(),
        "local_controller_port": free_port(),
    }
    values.update(overrides)
    return Settings.model_validate(values)


def _cli_env(cfg: Settings) -> dict[str, str | None]:
    """Environment that points the CLI at `cfg`'s broker (and away from any configured cluster)."""
    return {
        "AGL_HOME": str(cfg.home),
        "AGL_KAFKA_PORT": str(cfg.local_port),
        "AGL_KAFKA_CONTROLLER_PORT": str(cfg.local_controller_port),
        "AGL_KAFKA_BOOTSTRAP": None,
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    """A broker manager on a private home and ports; whatever it started is stopped at the end."""
    managed = LocalBroker(_settings(tmp_path_factory.mktemp("agl-home")))
    try:
        yield managed
    finally:
        managed.stop(timeout=20)


@pytest.fixture(scope="module")
def started(broker: LocalBroker) -> BrokerStatus:
    return broker.start(timeout=90)


def _round_trip(bootstrap: str, topic: str, payload: bytes, *, produce: bool = True) -> bytes:
    """Produce `payload` (optionally) and read the topic's first message through a new group."""
    if produce:
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(topic, key=b"k", value=payload)
        assert producer.flush(30) == 0, "message not delivered"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4()}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        message = eventually(lambda: consumer.poll(0.5), f"a message consumed from {topic}",
                             until=lambda polled: polled is not None and not polled.error())
        return message.value() or b""
    finally:
        consumer.close()


# ---------------------------------------------------------------------- the shared broker, in order


@pytest.mark.kafka
def test_start_reports_a_running_broker(broker: LocalBroker, started: BrokerStatus) -> None:
    assert started.running and started.ready
    assert started.pid is not None
    assert started.bootstrap == f"localhost:{broker.settings.local_port}"
    assert started.data_dir == broker.settings.home / "kafka" / "data"
    assert broker.pid_file.read_text().strip() == str(started.pid)
    assert broker.cluster_id_file.read_text().strip()
    status = broker.status()
    assert status.running and status.ready and status.pid == started.pid


#: Readers of as many groups (so of as many `__consumer_offsets` partitions) started at once on the fresh broker.
GROUP_READERS = 20


@pytest.mark.kafka
def test_group_readers_started_while_the_fresh_broker_loads_its_group_coordinators_read_every_partition(
        broker: LocalBroker, started: BrokerStatus) -> None:
    """Readers assigned at their group's committed offsets (`Start.STORED`, as the store's ingester reads task
    requests) just after the broker created `__consumer_offsets`: each reads every partition. Left to librdkafka,
    an offset fetch answered NOT_COORDINATOR (a coordinator not loaded yet) is retried twice and its partitions are
    then never read, until assigned again (a test_dlq task request once never reached the DLQ so); 6 of 20 readers
    here read nothing before `GroupConsumer.assign` fetched the offsets itself. The first test on this broker to
    use a consumer group: the round trip below creates `__consumer_offsets` otherwise."""
    admin = make_admin(started.bootstrap)
    topic = "agl-test-stored-offsets"
    create_topic(admin, topic, 3)
    producer = Producer({"bootstrap.servers": started.bootstrap})
    for partition in range(3):
        producer.produce(topic, value=b"x", partition=partition)
    assert producer.flush(30) == 0
    trigger = Consumer({"bootstrap.servers": started.bootstrap, "group.id": "agl-test-trigger"})
    readers: list[GroupConsumer] = []
    try:
        trigger.subscribe([topic])  # its coordinator lookup makes the broker create __consumer_offsets
        eventually(lambda: "__consumer_offsets" in admin.list_topics(timeout=5).topics, "__consumer_offsets created")
        readers = [GroupConsumer(started.bootstrap, f"agl-test-stored-{n}", f"reader {n}",
                                 **{"enable.partition.eof": False}) for n in range(GROUP_READERS)]
        for reader in readers:
            reader.assign(topic, Start.STORED)
        read: dict[int, set[int]] = {n: set() for n in range(GROUP_READERS)}

        def unread() -> dict[int, set[int]]:
            for n, reader in enumerate(readers):
                read[n] |= {record.partition for record in reader.consume(10, 0.01)}
            return {n: partitions for n, partitions in read.items() if partitions != {0, 1, 2}}

        eventually(unread, "every reader read all three partitions", until=lambda left: not left)
    finally:
        trigger.close()
        for reader in readers:
            reader.close()


@pytest.mark.kafka
def test_message_round_trip_via_an_auto_created_topic(broker: LocalBroker, started: BrokerStatus) -> None:
    assert _round_trip(started.bootstrap, "agl-test-round-trip", b"hello kafka") == b"hello kafka"


@pytest.mark.kafka
def test_broker_logs_to_server_log(broker: LocalBroker, started: BrokerStatus) -> None:
    assert broker.log_file == broker.settings.home / "kafka" / "logs" / "server.log"
    assert any("Kafka Server started" in line for line in broker.tail(500))
    assert len(broker.tail(3)) == 3


@pytest.mark.kafka
def test_starting_twice_is_harmless(broker: LocalBroker, started: BrokerStatus) -> None:
    again = broker.start()
    assert again.running and again.pid == started.pid
    assert "already running" in again.message


@pytest.mark.kafka
def test_ensure_broker_reuses_the_running_broker(broker: LocalBroker, started: BrokerStatus) -> None:
    assert ensure_broker(broker.settings) == started.bootstrap
    assert broker.status().pid == started.pid


@pytest.mark.kafka
def test_cli_status_and_logs(broker: LocalBroker, started: BrokerStatus, tmp_path: Path) -> None:
    runner = CliRunner()
    running = runner.invoke(app, ["kafka", "status"], env=_cli_env(broker.settings))
    assert running.exit_code == 0, running.output
    assert str(started.pid) in running.output
    assert "open files" in running.output and "delete experiments" not in running.output

    # Near its open-files limit the broker would soon stop: status says so (the limit lowered for a moment).
    pid = started.pid or 0
    limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (len(os.listdir(f"/proc/{pid}/fd")) + 20, limits[1]))
    try:
        near = runner.invoke(app, ["kafka", "status"], env=_cli_env(broker.settings))
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
    assert near.exit_code == 0, near.output
    assert "delete experiments you no longer need" in " ".join(near.output.split())

    stopped = runner.invoke(app, ["kafka", "status"], env=_cli_env(_settings(tmp_path)))
    assert stopped.exit_code == 3, stopped.output
    assert "not running" in stopped.output

    logs = runner.invoke(app, ["kafka", "logs", "-n", "2"], env=_cli_env(broker.settings))
    assert logs.exit_code == 0, logs.output
    assert len(logs.output.splitlines()) == 2


@pytest.mark.kafka
def test_stop_stops_the_broker(broker: LocalBroker, started: BrokerStatus) -> None:
    stopped = broker.stop()
    assert not stopped.running
    assert "stopped" in stopped.message
    assert not broker.pid_file.exists()
    assert not broker.status().running
    assert not broker.is_ready()
    with pytest.raises(ProcessLookupError):
        os.kill(started.pid or 0, 0)
    assert broker.stop().message == "not running"


@pytest.mark.kafka
def test_restart_keeps_cluster_and_data(broker: LocalBroker, started: BrokerStatus) -> None:
    cluster_id = broker.cluster_id_file.read_text()
    restarted = broker.start(timeout=90)
    assert restarted.running and restarted.pid != started.pid
    assert broker.cluster_id_file.read_text() == cluster_id
    assert _round_trip(restarted.bootstrap, "agl-test-round-trip", b"", produce=False) == b"hello kafka"
    broker.stop()


# ---------------------------------------------------------------------- without the shared broker


def test_stale_pid_file_is_reported_and_removed(tmp_path: Path) -> None:
    broker = LocalBroker(_settings(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    broker.kafka_dir.mkdir(parents=True)
    broker.pid_file.write_text(f"{gone.pid}\n")

    status = broker.status()

    assert not status.running
    assert "stale pid file" in status.message and str(gone.pid) in status.message
    assert not broker.pid_file.exists()


@pytest.mark.parametrize("which", ["local_port", "local_controller_port"])
def test_port_held_by_a_foreign_listener_is_a_clear_error(tmp_path: Path, which: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as foreign:
        foreign.bind(("127.0.0.1", 0))
        foreign.listen()
        port = int(foreign.getsockname()[1])
        broker = LocalBroker(_settings(tmp_path, **{which: port}))
        variable = "AGL_KAFKA_PORT" if which == "local_port" else "AGL_KAFKA_CONTROLLER_PORT"
        with pytest.raises(BrokerError, match=rf"port {port}\b.*{variable}"):
            broker.start()
    assert not broker.pid_file.exists()


@pytest.mark.kafka
def test_broker_dying_during_startup_reports_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka exits when its port is taken after our check; the error quotes the log."""
    broker = LocalBroker(_settings(tmp_path))
    monkeypatch.setattr(LocalBroker, "_check_ports_free", lambda self: None)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as foreign:
        foreign.bind(("127.0.0.1", broker.settings.local_port))
        foreign.listen()
        with pytest.raises(BrokerError, match="exited during startup") as failure:
            broker.start(timeout=90)
    assert "server.log" in str(failure.value)
    assert str(broker.settings.local_port) in str(failure.value)  # Kafka's bind error, quoted
    assert not broker.pid_file.exists()


def test_missing_maven_or_java_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = LocalBroker(_settings(tmp_path))
    monkeypatch.setattr(home, "LIBS_DIR", tmp_path / "no-libs")  # as if Kafka was never fetched
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "mvn" else real_which(name))
    with pytest.raises(BrokerError, match=r"Maven.*Java 17"):
        broker.fetch()

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(BrokerError, match=r"Java \(`java`\) is needed.*Maven"):
        broker.start()
    assert not broker.pid_file.exists()


@pytest.mark.kafka
def test_ensure_broker_with_bootstrap_never_starts_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bootstrap: str
) -> None:
    """A configured cluster is only asked whether it answers: the running one is used, a wrong one named."""
    def refuse(self: LocalBroker, timeout: float = 60.0) -> BrokerStatus:
        raise AssertionError("must not start a local broker when a cluster is configured")

    monkeypatch.setattr(LocalBroker, "start", refuse)
    assert ensure_broker(_settings(tmp_path, bootstrap=bootstrap)) == bootstrap
    wrong = _settings(tmp_path, bootstrap="kafka-1.example:9092,kafka-2.example:9092", kafka_timeout=1)
    with pytest.raises(KafkaUnreachableError, match=r"kafka-1\.example:9092: unknown host, "
                                                    r"kafka-2\.example:9092: unknown host"):
        ensure_broker(wrong)
    assert not (tmp_path / "kafka").exists()


def test_cli_start_and_stop_refuse_with_a_remote_cluster(tmp_path: Path) -> None:
    env = {**_cli_env(_settings(tmp_path)), "AGL_KAFKA_BOOTSTRAP": "kafka-1.example:9092"}
    for command in ("start", "stop"):
        result = CliRunner().invoke(app, ["kafka", command], env=env)
        assert result.exit_code == 1
        assert "remote Kafka cluster is configured" in " ".join(result.output.split())
    assert not (tmp_path / "kafka").exists()

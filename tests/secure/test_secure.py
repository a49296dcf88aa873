"""A broker that demands SASL/SCRAM-SHA-512 over TLS and enforces ACLs (`broker.secure`), met by every process of
ours through `--kafka-config`: each does one real thing as a principal that holds only its role's ACLs
(`roles.role_grants`); clients without credentials or with a wrong password are refused in one line and write
nothing; the runner's principal may not delete topics nor write where it has no business.

One broker for the module (a start costs seconds), on its own ports and home; one experiment whose topics the
store creates as its own principal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from agl_events.broker.secure import ADMIN, SecureBroker, write_properties_file
from agl_events.config import Settings
from agl_events.log.consumer import GroupConsumer, Start
from agl_events.proc.ports import free_port
from agl_events.roles import ROLES, role_grants
from agl_events.topics import Topic, topic_name
from tests.eventually import eventually

pytestmark = [pytest.mark.kafka, pytest.mark.secure,
              pytest.mark.skipif(shutil.which("java") is None, reason="the local Kafka broker needs Java 17+")]

EXPERIMENT = f"sec{uuid.uuid4().hex[:8]}"


class Secured:
    """The running broker, one `--kafka-config` file per role (and admin), and a place for bad ones."""

    def __init__(self, broker: SecureBroker, folder: Path) -> None:
        self.broker, self.folder = broker, folder
        self.configs = {name: write_properties_file(folder / f"{name}.properties", broker.client_config(name))
                        for name in broker.users}

    def config_with(self, name: str, changes: dict[str, str | None]) -> Path:
        """A `--kafka-config` file like admin's, with settings changed (None: removed)."""
        properties = {**self.broker.client_config(ADMIN), **changes}
        return write_properties_file(self.folder / f"{name}.properties",
                                     {key: value for key, value in properties.items() if value is not None})

    def admin(self) -> AdminClient:
        return AdminClient({**self.broker.client_config(ADMIN), "bootstrap.servers": self.broker.bootstrap})

    def env(self) -> dict[str, str]:
        env = {**os.environ, "AGL_KAFKA_BOOTSTRAP": self.broker.bootstrap, "AGL_HOME": str(self.folder / "home"),
               "AGL_KAFKA_TIMEOUT": "20"}
        env.pop("AGL_KAFKA_CONFIG", None)
        return env

    def command(self, config: Path | None) -> list[str]:
        """`agl-events` against this broker's experiment, logged in with `config` (None: no settings)."""
        options = ["--kafka-config", str(config)] if config else []
        return [sys.executable, "-m", "agl_events", *options, "--experiment", EXPERIMENT]

    def cli(self, config: Path | None, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.command(config), *args], capture_output=True, text=True, timeout=timeout,
                              env=self.env())

    def end_offsets(self, topic: str) -> list[int]:
        """Where each partition of `topic` ends (a partition answers NOT_LEADER for a moment after the start)."""
        return eventually(lambda: self._end_offsets(topic), f"the end offsets of {topic}", ignoring=(KafkaException,))

    def _end_offsets(self, topic: str) -> list[int]:
        consumer = Consumer({**self.broker.client_config(ADMIN), "bootstrap.servers": self.broker.bootstrap,
                             "group.id": "test-offsets"})
        try:
            partitions = consumer.list_topics(topic, timeout=20).topics[topic].partitions
            return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in partitions]
        finally:
            consumer.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    folder = tmp_path_factory.mktemp("secure")
    settings = Settings.model_validate({"home": folder / "broker", "local_port": free_port(),
                                        "local_controller_port": free_port()})
    broker = SecureBroker(settings, {role: f"{role}-{uuid.uuid4().hex}" for role in ROLES})
    try:
        broker.start(timeout=90)
        for role in ROLES:
            broker.grant(role, role_grants(role, EXPERIMENT))
        made = Secured(broker, folder)
        created = made.cli(made.configs["store"], "topics", "create")
        assert created.returncode == 0, created.stdout + created.stderr
        yield made
    finally:
        broker.stop(timeout=20)


def _tasks(folder: Path, count: int) -> Path:
    path = folder / f"tasks-{uuid.uuid4().hex[:6]}.jsonl"
    path.write_text("".join(json.dumps({"input": {"i": i}}) + "\n" for i in range(count)))
    return path


@pytest.mark.parametrize("login", ["no settings", "wrong password", "no CA"])
def test_a_client_that_cannot_log_in_is_refused_in_one_line_and_writes_nothing(secured: Secured, login: str) -> None:
    config = {"no settings": None,
              "wrong password": secured.config_with("wrong", {"sasl.password": "not-the-password"}),
              "no CA": secured.config_with("no-ca", {"ssl.ca.location": None})}[login]
    requests = topic_name(EXPERIMENT, Topic.TASK_REQUESTS)
    before = secured.end_offsets(requests)

    result = secured.cli(config, "--kafka-timeout", "5", "produce", "tasks", str(_tasks(secured.folder, 5)))

    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    expected = {"no settings": "speaks TLS", "wrong password": "refused the login", "no CA": "certificate"}[login]
    assert expected in line, line
    assert secured.end_offsets(requests) == before


AGENT = "agl_events.chaos.agent:chaos_agent"
#: Seconds to wait for processes started here (a store, workers, a runner) on a loaded machine.
UP = 90.0


def _succeeded(store: str) -> int:
    response = httpx.get(f"{store}/v1/agl/rollouts", params={"status_in": "succeeded", "limit": 1}, timeout=10)
    return int(response.json()["total"]) if response.status_code == 200 else -1


def _committed(admin: AdminClient, group: str) -> int:
    """How many records `group` has committed past, over all partitions."""
    [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return sum(max(tp.offset, 0) for tp in future.result().topic_partitions)


def test_every_process_does_its_work_logged_in_as_its_role(secured: Secured, tmp_path: Path) -> None:
    """store, processor, samples worker, runner, proxy, produce and replay, each as its role's principal."""
    port, proxy_port = free_port(), free_port()
    store = f"http://127.0.0.1:{port}"
    models = tmp_path / "models.yaml"
    models.write_text("model_list:\n  - model_name: policy\n    litellm_params:\n      model: openai/policy\n"
                      "      api_base: http://127.0.0.1:9/v1\n      api_key: none\n")
    started: list[subprocess.Popen[bytes]] = []

    def start(role: str, *args: str) -> None:
        log = (tmp_path / f"{role}.log").open("wb")
        started.append(subprocess.Popen([*secured.command(secured.configs[role]), *args], stdout=log,
                                        stderr=subprocess.STDOUT, env=secured.env()))

    try:
        start("store", "store", "--port", str(port))
        start("worker", "processor")
        start("worker", "samples")
        start("runner", "runner", "--agent", AGENT, "-n", "1", "--store-url", store)
        start("proxy", "proxy", "--model-list", str(models), "--port", str(proxy_port), "--store-url", store)
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"input": {"i": i, "step_seconds": 0.01}}) + "\n" for i in range(3)))
        produced = secured.cli(secured.configs["produce"], "produce", "tasks", str(tasks))
        assert produced.returncode == 0, produced.stdout + produced.stderr

        logs = lambda: "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in tmp_path.glob("*.log"))  # noqa: E731
        eventually(lambda: _succeeded(store), "3 rollouts run by the runner", within=UP, until=lambda n: n == 3,
                   ignoring=(httpx.HTTPError,), context=logs)
        samples = topic_name(EXPERIMENT, Topic.SAMPLES)
        eventually(lambda: sum(secured.end_offsets(samples)), "the samples worker's samples", within=UP,
                   until=lambda n: n >= 3, context=logs)
        admin = secured.admin()
        eventually(lambda: _committed(admin, f"agl-processor-{EXPERIMENT}"), "the processor's folded records",
                   within=UP, context=logs)
        health = f"http://127.0.0.1:{proxy_port}/health"
        eventually(lambda: httpx.get(health, timeout=10).status_code, "the proxy's health", within=UP,
                   until=lambda code: code == 200, ignoring=(httpx.HTTPError,), context=logs)
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()

    rebuilt = secured.cli(secured.configs["replay"], "replay", "rebuild", "--to", str(tmp_path / "view"))
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr


def test_the_runner_principal_may_not_delete_topics_nor_write_the_store_s_topics(secured: Secured) -> None:
    runner = {**secured.broker.client_config("runner"), "bootstrap.servers": secured.broker.bootstrap}
    rollouts = topic_name(EXPERIMENT, Topic.ROLLOUTS)
    admin = AdminClient(runner)  # kept: a collected client ends its requests with _DESTROY
    [deleting] = admin.delete_topics([rollouts], operation_timeout=20, request_timeout=20).values()
    with pytest.raises(KafkaException) as refused:
        deleting.result()
    assert refused.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"

    before = secured.end_offsets(rollouts)
    reports: list[KafkaError | None] = []
    producer = Producer(runner)
    producer.produce(rollouts, key=b"r", value=b"not a runner's to write", on_delivery=lambda e, _: reports.append(e))
    producer.flush(30)
    [error] = reports
    assert error is not None and error.name() == "TOPIC_AUTHORIZATION_FAILED"
    assert secured.end_offsets(rollouts) == before
    assert rollouts in secured.admin().list_topics(timeout=20).topics


def test_a_reader_whose_principal_may_not_read_its_group_is_refused_at_once_saying_which_group(
        secured: Secured, caplog: pytest.LogCaptureFixture) -> None:
    """Reading from a group's committed offsets as a principal without its ACLs: refused at the first answer (it
    was asked again every 0.2 s for a minute, logged each time, then raised without naming the group)."""
    consumer = GroupConsumer(secured.broker.bootstrap, "agl-not-granted", "control",
                             **secured.broker.client_config("runner"))
    try:
        with pytest.raises(KafkaException) as refused:
            consumer.assign(topic_name(EXPERIMENT, Topic.CONTROL), Start.STORED)
    finally:
        consumer.close()
    assert refused.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
    assert "the committed offsets of consumer group agl-not-granted cannot be read" in str(refused.value)
    assert not [record for record in caplog.records if "asking again" in record.getMessage()]


#: In a process of its own, as a trainer is (its connection settings come from AGL_KAFKA_CONFIG): open the
#: transactional writer a GRPO trainer commits its steps with (its transactional id is the sample stream's group).
_OPEN_STEP_WRITER = """
import sys
from agl_events.log.transactions import TransactionalWriter
from agl_events.samples.stream import default_group
TransactionalWriter(sys.argv[1], default_group(sys.argv[2]), timeout=30)
print("initialised")
"""


def test_the_trainer_principal_opens_its_step_transactions_and_the_runner_principal_may_not(secured: Secured
                                                                                          ) -> None:
    """The one client a trainer adds to what the store, runner and worker roles run (tested above): the
    transactional producer of its step records, whose transactional id only the trainer role is granted."""
    def open_as(role: str) -> subprocess.CompletedProcess[str]:
        env = {**secured.env(), "AGL_KAFKA_CONFIG": str(secured.configs[role])}
        return subprocess.run([sys.executable, "-c", _OPEN_STEP_WRITER, secured.broker.bootstrap, EXPERIMENT],
                              capture_output=True, text=True, timeout=120, env=env)

    trainer = open_as("trainer")
    assert trainer.returncode == 0 and trainer.stdout.strip() == "initialised", trainer.stderr
    runner = open_as("runner")
    assert runner.returncode != 0 and "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in runner.stderr, runner.stderr

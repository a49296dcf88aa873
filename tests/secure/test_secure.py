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

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from agl_events.broker.secure import ADMIN, SecureBroker, write_properties_file
from agl_events.config import Settings
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

    def cli(self, config: Path | None, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`agl-events` as a separate process against this broker, logged in with `config` (None: no settings)."""
        env = {**os.environ, "AGL_KAFKA_BOOTSTRAP": self.broker.bootstrap, "AGL_HOME": str(self.folder / "home"),
               "AGL_KAFKA_TIMEOUT": "20"}
        env.pop("AGL_KAFKA_CONFIG", None)
        options = ["--kafka-config", str(config)] if config else []
        return subprocess.run([sys.executable, "-m", "agl_events", *options, "--experiment", EXPERIMENT, *args],
                              capture_output=True, text=True, timeout=timeout, env=env)

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

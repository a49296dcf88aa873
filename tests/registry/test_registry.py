"""A real Confluent-compatible Schema Registry (Apicurio Registry): our schemas registered under topic-name
subjects, a task written by confluent-kafka's stock AvroSerializer ingested by the store, and the registry's
compatibility check and ours giving the same verdict on schema changes."""

from __future__ import annotations

import copy
import json
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from typer.testing import CliRunner

from agl_events.broker.registry_server import RegistryServer
from agl_events.cli.main import app
from agl_events.config import Settings
from agl_events.events.schemas import SCHEMAS_DIR, EventSchema, build_event_schema, load_event_schemas
from agl_events.log.registry import ConfluentRegistry
from agl_events.log.subjects import register_schemas, subject_name
from agl_events.reducers.rollouts import TASK_KEY
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import Topic, topic_name
from tests.eventually import eventually_async

pytestmark = pytest.mark.registry

TASK_REQUESTED = load_event_schemas()["TaskRequested"]


def _experiment() -> str:
    return f"r{uuid.uuid4().hex[:10]}"


def _register(registry_url: str, experiment: str) -> Any:
    return CliRunner().invoke(app, ["--experiment", experiment, "schemas", "register", "--registry", registry_url])


def test_registry_status_finds_the_running_registry_by_its_home(registry_server: RegistryServer,
                                                                  tmp_path: Path) -> None:
    home = registry_server.dir.parent
    running = CliRunner().invoke(app, ["--home", str(home), "schemas", "registry", "status"])
    assert running.exit_code == 0, running.output
    expected = f"running (pid {registry_server.pid()}), answering on {registry_server.url}"
    assert " ".join(running.output.split()) == expected
    elsewhere = CliRunner().invoke(app, ["--home", str(tmp_path), "schemas", "registry", "status"])
    assert (elsewhere.exit_code, elsewhere.output.strip()) == (3, "not running")


def test_schemas_register_puts_every_schema_under_its_topic_subject_once(registry_url: str) -> None:
    experiment = _experiment()
    first = _register(registry_url, experiment)
    assert first.exit_code == 0, first.output
    client = SchemaRegistryClient({"url": registry_url})
    subjects = {s for s in client.get_subjects() if s.startswith(f"agl.{experiment}.")}
    schemas = load_event_schemas()
    assert len(subjects) == len(schemas) == first.output.count("registered ")
    # One kind on the topic: Confluent's default topic-name strategy, as stock serializers look it up.
    requests = subject_name(experiment, Topic.TASK_REQUESTS)
    assert requests == f"agl.{experiment}.task-requests-value"
    latest = client.get_latest_version(requests)
    assert json.loads(latest.schema.schema_str) == TASK_REQUESTED.schema
    assert client.get_compatibility(requests) == "BACKWARD"
    # Several kinds on the topic: a subject per kind (topic-record-name strategy).
    assert f"agl.{experiment}.rollouts-agl.events.RolloutEnqueued" in subjects
    again = _register(registry_url, experiment)
    assert again.exit_code == 0, again.output
    assert again.output.count("unchanged ") == len(schemas) and "registered " not in again.output
    assert client.get_latest_version(requests).version == latest.version


def test_schemas_register_refuses_an_incompatible_version_and_says_why(registry_url: str) -> None:
    """The registry's latest TaskRequested lacks `input_json`; ours adds it without a default: both refuse."""
    experiment = _experiment()
    older = copy.deepcopy(TASK_REQUESTED.schema)
    older["fields"] = [f for f in older["fields"] if f["name"] != "input_json"]
    ConfluentRegistry(registry_url).register_schema(subject_name(experiment, Topic.TASK_REQUESTS), json.dumps(older))
    result = _register(registry_url, experiment)
    assert result.exit_code == 1
    output = " ".join(result.output.split())  # the console wraps long lines
    assert (f"refused agl.{experiment}.task-requests-value: the registry refuses it under BACKWARD; ours refuses: "
            "at $.input_json: field added without a default") in output
    assert "disagree" not in output


@pytest.mark.kafka
async def test_a_task_written_by_confluents_avro_serializer_is_ingested(registry_url: str, settings: Settings,
                                                                        tmp_path: Path) -> None:
    """A client with nothing of ours: confluent-kafka's AvroSerializer with the registry, defaults (topic-name
    strategy, auto-registration), the TaskRequested schema file as its schema."""
    register_schemas(ConfluentRegistry(registry_url), [TASK_REQUESTED], settings.experiment)
    topic = topic_name(settings.experiment, Topic.TASK_REQUESTS)
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}),
                                (SCHEMAS_DIR / "TaskRequested.avsc").read_text())
    value = serializer({"input_json": json.dumps({"question": "2+2"}), "mode": "train",
                        "metadata_json": json.dumps({"source": "serializer"})},
                       SerializationContext(topic, MessageField.VALUE))
    assert value is not None and value[:1] == b"\x00"  # Confluent's wire format: magic byte, schema id, body
    registered = SchemaRegistryClient({"url": registry_url}).get_schema(struct.unpack(">I", value[1:5])[0])
    assert json.loads(registered.schema_str)["name"] == "TaskRequested"
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    producer.produce(topic, key=b"task-1", value=value)
    assert producer.flush(30) == 0
    store = await KafkaLightningStore.open(settings.model_copy(update={"schema_registry_url": registry_url}),
                                           view_dir=tmp_path / "view")
    try:
        ingester = store.ingester
        await eventually_async(lambda: (ingester.enqueued, ingester.dead_lettered), "the request handled",
                               within=60, until=lambda handled: sum(handled) >= 1)
        assert (ingester.enqueued, ingester.dead_lettered) == (1, 0)
        rollout_id = (await store.task_rollouts(["task-1"])).get("task-1")
        assert rollout_id is not None
        rollout = await store.get_rollout_by_id(rollout_id)
        assert rollout is not None and rollout.input == {"question": "2+2"} and rollout.mode == "train"
        assert rollout.metadata == {"source": "serializer", TASK_KEY: "task-1"}
    finally:
        await store.close()


def _changed(change: str) -> EventSchema:
    """TaskRequested with one change."""
    schema = copy.deepcopy(TASK_REQUESTED.schema)
    fields: list[dict[str, Any]] = schema["fields"]
    if change == "a field added without a default":
        fields.append({"name": "priority", "type": "int"})
    elif change == "a field added with a default":
        fields.append({"name": "priority", "type": "int", "default": 0})
    elif change == "an optional field removed":
        schema["fields"] = [f for f in fields if f["name"] != "producer_id"]
    elif change == "a string field made an int":
        next(f for f in fields if f["name"] == "input_json")["type"] = "int"
    elif change == "null taken out of an optional field's union":
        mode = next(f for f in fields if f["name"] == "mode")
        mode["type"], mode["default"] = "string", "train"
    return build_event_schema(schema)


@pytest.mark.parametrize(("level", "change", "accepted"), [
    ("BACKWARD", "a field added without a default", False),
    ("BACKWARD", "a field added with a default", True),
    ("BACKWARD", "an optional field removed", True),
    ("BACKWARD", "a string field made an int", False),
    ("BACKWARD", "null taken out of an optional field's union", False),
    ("FORWARD", "a field added without a default", True),
    ("FORWARD", "null taken out of an optional field's union", True),
    ("FULL", "a field added without a default", False),
    ("FULL", "a field added with a default", True),
])
def test_the_registry_and_our_check_give_the_same_verdict(registry_url: str, level: str, change: str,
                                                          accepted: bool) -> None:
    registry = ConfluentRegistry(registry_url)
    experiment = _experiment()
    [first] = register_schemas(registry, [TASK_REQUESTED], experiment, level)
    [result] = register_schemas(registry, [_changed(change)], experiment, level)
    assert (result.registry_accepts, not result.our_reasons) == (accepted, accepted), result
    latest = registry.latest(subject_name(experiment, Topic.TASK_REQUESTS))
    assert latest is not None
    assert latest[0] == (result.schema_id if accepted else first.schema_id)

"""Our event schemas in a Schema Registry, under the subjects Confluent's serializers look up, each new version
judged by the registry's compatibility check and by ours (`events.compat`) before it is registered.

Subjects follow Confluent's topic-name strategy, `<topic>-value`, which its serializers use by default: a client
writing task requests with a stock `AvroSerializer` finds `TaskRequested` under `agl.<experiment>.task-requests-value`.
That strategy keeps one record type per subject, since the registry judges every new version against the last,
and a `RolloutStarted` cannot read a `RolloutEnqueued`. So a topic that carries several kinds (rollouts, attempts,
spans, resources, workers) has a subject per kind, `<topic>-<full record name>`: Confluent's topic-record-name
strategy, made for topics with several event types.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from agl_events.events.compat import check_pair
from agl_events.events.kinds import KINDS
from agl_events.events.schemas import EventSchema
from agl_events.log.registry import ConfluentRegistry
from agl_events.topics import Topic, topic_name


def subject_of(experiment: str, schema: EventSchema) -> str:
    """The subject of `schema`'s kind in `experiment` (see the module's docstring)."""
    topic = KINDS[schema.name].topic
    kinds_on_topic = Counter(spec.topic for spec in KINDS.values())
    return subject_name(experiment, topic, schema.full_name if kinds_on_topic[topic] > 1 else None)


def subject_name(experiment: str, topic: Topic, record: str | None = None) -> str:
    """`<topic>-value` (topic-name strategy), or `<topic>-<record>` (topic-record-name strategy)."""
    return f"{topic_name(experiment, topic)}-{record or 'value'}"


def our_verdict(level: str, new: dict[str, object], latest: dict[str, object]) -> list[str]:
    """Why `new` may not follow `latest` under Confluent's `level`, by our check ([] when it may).

    BACKWARD: readers of the new schema read what the latest wrote; FORWARD: the other way round; FULL: both."""
    pairs = {"BACKWARD": [(new, latest)], "FORWARD": [(latest, new)], "FULL": [(new, latest), (latest, new)]}
    return [f"at {path}: {reason}" for reader, writer in pairs.get(level, []) for path, reason in
            check_pair(reader, writer)]


@dataclass(frozen=True)
class Registration:
    """What became of one schema: `schema_id` when it is (now) the subject's latest version, else refused."""

    subject: str
    schema_id: int | None
    #: Registered now (False: it was the latest version already, or it was refused).
    new: bool
    #: The registry's verdict on the new version (True for a subject's first version).
    registry_accepts: bool = True
    #: Our check's reasons to refuse it ([]: ours accepts).
    our_reasons: list[str] = field(default_factory=list)

    @property
    def agreed(self) -> bool:
        """Both checks gave the same verdict."""
        return self.registry_accepts == (not self.our_reasons)


def register_schemas(registry: ConfluentRegistry, schemas: Iterable[EventSchema], experiment: str,
                     level: str = "BACKWARD") -> list[Registration]:
    """Register each schema of `schemas` under its subject with compatibility `level`, unless it is the latest
    version there already. A version the registry or our check refuses is not registered: where the two
    disagree, one of them is wrong about Avro, and registering would let readers and writers part ways."""
    return [_register(registry, schema, subject_of(experiment, schema), level) for schema in schemas]


def _register(registry: ConfluentRegistry, schema: EventSchema, subject: str, level: str) -> Registration:
    text = json.dumps(schema.schema)
    latest = registry.latest(subject)
    if latest is not None and json.loads(latest[1]) == schema.schema:
        return Registration(subject, latest[0], new=False)
    registry.set_compatibility(subject, level)
    if latest is None:
        return Registration(subject, registry.register_schema(subject, text), new=True)
    reasons = our_verdict(level, schema.schema, json.loads(latest[1]))
    accepts = registry.is_compatible(subject, text)
    if accepts and not reasons:
        return Registration(subject, registry.register_schema(subject, text), new=True)
    return Registration(subject, None, new=False, registry_accepts=accepts, our_reasons=reasons)

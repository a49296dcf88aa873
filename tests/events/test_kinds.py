"""One registry of event kinds: the schemas, the topic layout, the reducers and the store all agree with it."""

from __future__ import annotations

import pytest

from agl_events.events.codec import AvroCodec, UnknownSchemaError
from agl_events.events.kinds import FINISHING_KINDS, KINDS, Kind
from agl_events.events.schemas import load_event_schemas
from agl_events.reducers import REDUCERS
from agl_events.topics import LAYOUT, VIEW_TOPICS
from tests.events.sample import sample


def test_every_kind_has_a_schema_and_every_schema_a_kind() -> None:
    assert set(load_event_schemas().by_name) == set(KINDS) == {k.value for k in Kind}


def test_folded_kinds_are_exactly_the_reducers_and_live_on_the_view_topics() -> None:
    folded = {kind for kind, spec in KINDS.items() if spec.folded}
    assert set(REDUCERS) == folded
    assert set(VIEW_TOPICS) == {KINDS[kind].topic for kind in folded}
    # Only RolloutFinished rides a view topic unfolded (it marks the end of a trace among the spans).
    assert {k for k, spec in KINDS.items() if not spec.folded and spec.topic in VIEW_TOPICS} == {"RolloutFinished"}


def test_every_kind_goes_to_a_topic_of_the_layout() -> None:
    assert {spec.topic for spec in KINDS.values()} <= {spec.topic for spec in LAYOUT}


def test_the_store_reads_kinds_from_the_registry() -> None:
    assert set(REDUCERS) >= FINISHING_KINDS


def test_a_schema_that_is_no_event_kind_is_refused_when_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """E.g. another application's schema in a shared registry: a decode error, so it is dead-lettered."""
    schema = load_event_schemas().by_name["WorkerHeartbeat"]
    codec = AvroCodec()
    data = codec.encode(schema.name, {f["name"]: sample(f["type"]) for f in schema.schema["fields"]})
    monkeypatch.delitem(KINDS, "WorkerHeartbeat")
    with pytest.raises(UnknownSchemaError, match="not an event kind"):
        codec.decode(data)

"""Poison records on the real broker: each kind reaches the DLQ with its reason and origin while the live store
goes on serving; `agl-events dlq` lists, shows and replays them, each once.

Kinds: bytes that are no agl-events frame (rollouts topic), an unknown schema fingerprint (spans), a known
fingerprint with a truncated body (attempts), a task request that is no JSON (task-requests). A replay needs a
dead letter the current code reads: one is written to the DLQ as an older version of the store would have
written it (a valid RolloutEnqueued, dead-lettered under a schema that store did not know), which is exactly
what a replay after an upgrade finds.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.events.convert import rollout_record
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.dlq import DeadLetter, dead_letters, replay, unreplayable
from agl_events.log.records import event
from agl_events.store.kafka import KafkaLightningStore
from agl_events.topics import Topic, topic_name
from tests.eventually import eventually, eventually_async
from tests.samples import rollout

pytestmark = pytest.mark.kafka

CODEC = AvroCodec()


def _produce(bootstrap: str, topic: str, value: bytes, key: bytes | None = None,
             headers: dict[str, bytes] | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=value, key=key, headers=list((headers or {}).items()))
    assert producer.flush(10) == 0


def _poisons(settings: Settings) -> dict[str, tuple[bytes, str]]:
    """Topic -> (bytes, the error type the store gives them)."""
    good = CODEC.encode("RolloutEnqueued", event("RolloutEnqueued", "ro-x", 1.0, "foreign",
                                                 rollout=rollout_record(rollout("ro-x")), queue_seq=0).record)
    name = settings.experiment
    return {topic_name(name, Topic.ROLLOUTS): (b"not an agl-events record", "CorruptRecordError"),
            topic_name(name, Topic.SPANS): (b"\xc3\x01" + b"\x00" * 8 + b"body", "UnknownSchemaError"),
            topic_name(name, Topic.ATTEMPTS): (good[:20], "CorruptRecordError"),
            topic_name(name, Topic.TASK_REQUESTS): (b"{not json", "InvalidTaskRequest")}


def _older_stores_dead_letter(settings: Settings, rid: str) -> bytes:
    """A valid RolloutEnqueued in the DLQ, as a store that did not know its schema would have left it."""
    value = CODEC.encode("RolloutEnqueued", event("RolloutEnqueued", rid, time.time(), "newer-writer",
                                                  rollout=rollout_record(rollout(rid)), queue_seq=0).record)
    _produce(settings.bootstrap_servers, topic_name(settings.experiment, Topic.DLQ), value, rid.encode(), {
        "agl.source.topic": topic_name(settings.experiment, Topic.ROLLOUTS).encode(),
        "agl.source.partition": b"0", "agl.source.offset": b"123456",
        "agl.error.type": b"UnknownSchemaError", "agl.error.message": b"unknown schema fingerprint 0011223344556677"})
    return value


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "--experiment", settings.experiment, "dlq", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})


async def test_poison_reaches_the_dlq_the_store_goes_on_and_a_fixed_one_replays_once(settings: Settings,
                                                                                    tmp_path: Path) -> None:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", scan_debounce_seconds=3600)
    try:
        poisons = _poisons(settings)
        for topic, (value, _) in poisons.items():
            _produce(settings.bootstrap_servers, topic, value, b"ro-poison")

        def all_four() -> list[DeadLetter]:
            found = dead_letters(settings.bootstrap_servers, settings.experiment)
            return found if {d.topic for d in found} >= set(poisons) else []

        letters = await asyncio.to_thread(eventually, all_four, "dead letter of each poison", within=60)
        for letter in letters:
            value, error_type = poisons[letter.topic]
            assert (letter.value, letter.error_type, letter.key) == (value, error_type, b"ro-poison")
            assert letter.error and letter.offset >= 0 and letter.partition >= 0 and letter.replayed_to is None
            assert unreplayable(letter, CODEC, settings.experiment).startswith("still unreadable")
        # The store kept going past every one of them.
        fine = await store.enqueue_rollout(input={"after": "poison"})
        assert (await store.get_rollout_by_id(fine.rollout_id)) is not None

        listed = await asyncio.to_thread(_cli, settings, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert {d["origin"] for d in json.loads(listed.stdout)["dead_letters"]} == {d.origin for d in letters}

        fixed = _older_stores_dead_letter(settings, "ro-replayed")
        [letter] = [d for d in dead_letters(settings.bootstrap_servers, settings.experiment) if d.value == fixed]
        assert unreplayable(letter, CODEC, settings.experiment) is None
        shown = await asyncio.to_thread(_cli, settings, "show", str(letter.dlq_offset), "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["content"]["record"]["rollout"]["rollout_id"] == "ro-replayed"
        assert json.loads(shown.stdout)["replayable"] == "yes"

        first = await asyncio.to_thread(_cli, settings, "replay", "--all")
        assert first.returncode == 0, first.stdout + first.stderr
        assert "replayed 1, left 4" in first.stdout and f"{letter.origin}: replayed to " in first.stdout
        assert (await _until_rollout(store, "ro-replayed")).status == "succeeded"
        again = await asyncio.to_thread(_cli, settings, "replay", letter.origin)
        assert again.returncode == 1 and "already replayed" in again.stdout
        twice = await asyncio.to_thread(_cli, settings, "replay", "--all")
        assert "replayed 0, left 4" in twice.stdout  # nothing twice
        after = {d.origin: d for d in dead_letters(settings.bootstrap_servers, settings.experiment)}
        assert after[letter.origin].replayed_to is not None and len(after) == 5
        copies = [r for r in await store.query_rollouts() if r.rollout_id == "ro-replayed"]
        assert len(copies) == 1
    finally:
        await store.close()


async def _until_rollout(store: KafkaLightningStore, rid: str) -> Any:
    return await eventually_async(lambda: store.get_rollout_by_id(rid), f"{rid} in the store")


def test_copies_of_one_record_are_one_dead_letter_and_a_replay_marker_is_folded_in(settings: Settings) -> None:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    dlq = topic_name(settings.experiment, Topic.DLQ)
    origin = {"agl.source.topic": topic_name(settings.experiment, Topic.ROLLOUTS).encode(),
              "agl.source.partition": b"2", "agl.source.offset": b"7", "agl.error.type": b"CorruptRecordError",
              "agl.error.message": b"cannot decode"}
    for _ in range(3):  # a store, a restarted store and a rebuild each met it
        _produce(settings.bootstrap_servers, dlq, b"junk", b"k", origin)
    [letter] = dead_letters(settings.bootstrap_servers, settings.experiment)
    assert (letter.origin, letter.copies, letter.replayed_to) == (f"{origin['agl.source.topic'].decode()}/2/7", 3, None)
    done = replay(settings.bootstrap_servers, settings.experiment, [letter])  # the mechanism, whatever the content
    [after] = dead_letters(settings.bootstrap_servers, settings.experiment)
    assert after.replayed_to == done[letter.origin] and after.copies == 3
    assert unreplayable(after, CODEC, settings.experiment).startswith("already replayed")


def test_an_adapter_failure_is_listed_but_never_replayed(settings: Settings) -> None:
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    _produce(settings.bootstrap_servers, topic_name(settings.experiment, Topic.DLQ), b"marker", b"ro-1", {
        "agl.source.topic": topic_name(settings.experiment, Topic.SPANS).encode(), "agl.source.partition": b"0",
        "agl.source.offset": b"3", "agl.error.type": b"ValueError", "agl.error.message": b"no triplets"})
    [letter] = dead_letters(settings.bootstrap_servers, settings.experiment)
    assert "adapter failed" in (unreplayable(letter, CODEC, settings.experiment) or "")
    refused = _cli(settings, "replay", str(letter.dlq_offset))
    assert refused.returncode == 1 and "not replayed" in refused.stdout
    unknown = _cli(settings, "show", "999")
    assert unknown.returncode == 1 and "no dead letter '999'" in unknown.stdout
    both = _cli(settings, "replay", "--all", "1")
    assert both.returncode == 2 and "not both" in both.stderr


async def test_an_event_for_a_rollout_never_enqueued_is_kept_and_applies_once_replayed_after_it(
        settings: Settings, tmp_path: Path) -> None:
    """A writer that bypassed the store changed the status of a rollout nobody enqueued: the live store's view
    ignores it, copies it to the DLQ with the reason, and goes on; once the rollout exists, a replay applies it."""
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    store = await KafkaLightningStore.open(settings, view_dir=tmp_path / "view", scan_debounce_seconds=3600)
    try:
        rollouts = topic_name(settings.experiment, Topic.ROLLOUTS)
        change = event("RolloutStatusChanged", "ro-ghost", time.time(), "foreign", rollout_id="ro-ghost",
                       status="cancelled", previous_status="queuing", end_time=time.time(), queue_seq=None,
                       cause="a foreign writer")
        _produce(settings.bootstrap_servers, rollouts, CODEC.encode(change.kind, change.record), b"ro-ghost")

        def ignored() -> list[DeadLetter]:
            return [d for d in dead_letters(settings.bootstrap_servers, settings.experiment)
                    if d.error_type == "IgnoredEvent"]

        [letter] = await asyncio.to_thread(eventually, ignored, "dead letter of the ignored event", within=60)
        assert letter.topic == rollouts and "no rollout ro-ghost" in letter.error
        assert CODEC.decode(letter.value).record == change.record
        assert await store.get_rollout_by_id("ro-ghost") is None
        assert (await store.enqueue_rollout(input={"still": "serving"})).rollout_id

        enqueued = event("RolloutEnqueued", "ro-ghost", time.time(), "foreign",
                         rollout=rollout_record(rollout("ro-ghost", status="queuing")), queue_seq=0)
        _produce(settings.bootstrap_servers, rollouts, CODEC.encode(enqueued.kind, enqueued.record), b"ro-ghost")
        assert (await _until_rollout(store, "ro-ghost")).status == "queuing"
        assert unreplayable(letter, CODEC, settings.experiment) is None
        replay(settings.bootstrap_servers, settings.experiment, [letter])
        await eventually_async(lambda: store.get_rollout_by_id("ro-ghost"), "the replayed status change applied",
                               until=lambda found: found.status == "cancelled")
        assert len(ignored()) == 1  # applied, so not dead-lettered again
    finally:
        await store.close()

"""The producers' bounded local queue on the real broker: a full queue makes the caller wait, counted, and
drops nothing."""

from __future__ import annotations

import pytest

from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import PRODUCER_QUEUE_KB, make_admin, producer_config
from agl_events.log.records import event
from agl_events.log.writer import EventWriter


def test_every_producer_gets_the_queue_bound_and_a_call_site_may_set_its_own() -> None:
    assert producer_config("localhost:1", "c")["queue.buffering.max.kbytes"] == PRODUCER_QUEUE_KB == 64 * 1024
    assert producer_config("localhost:1", "c", **{"queue.buffering.max.kbytes": 64})["queue.buffering.max.kbytes"] == 64


@pytest.mark.kafka
def test_a_full_producer_queue_makes_the_caller_wait_and_every_event_is_acknowledged(
        bootstrap: str, experiment: str) -> None:
    create_topics(make_admin(bootstrap), experiment)
    # A 64 KB queue that lingers 500 ms before sending: 40 events of 8 KB cannot all be queued at once.
    writer = EventWriter(bootstrap, experiment, AvroCodec(), producer_id="test-backpressure",
                         **{"queue.buffering.max.kbytes": 64, "linger.ms": 500})
    events = [event("ResourcesPublished", f"rs-{v}", float(v), "test-backpressure",
                    resources={"resources_id": f"rs-{v}", "version": v, "create_time": 1.0, "update_time": 1.0,
                               "resources_json": '"' + "x" * 8192 + '"'})
              for v in range(1, 41)]
    try:
        assert writer.backpressure.stats.waits == 0
        logged = writer.append_sync(events)
    finally:
        writer.close()
    assert [e.key for e in logged] == [e.key for e in events]  # all durable, in order: nothing dropped
    assert writer.backpressure.stats.waits > 0 and writer.backpressure.stats.seconds > 0

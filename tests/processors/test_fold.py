"""The view processor's fold without faust: a batch of consumed records folds into the partitions' views through
`StoreView.fold`, the undecodable ones go to the DLQ as the log's `RawRecord`, and the views' positions move past
them (with the broker: the dead letters are really written and flushed before the positions move)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agl_events.events.codec import AvroCodec
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.log.dlq import dead_letters
from agl_events.log.records import RawRecord, event
from agl_events.log.writer import EventWriter
from agl_events.processors.context import ProcessorContext, fold_records
from agl_events.processors.partition_views import PartitionViews
from agl_events.topics import Topic, topic_name
from agl_events.views.kv import DictKV

pytestmark = pytest.mark.kafka


async def test_a_dead_lettered_record_is_read_once_and_copied_once(bootstrap: str, experiment: str,
                                                                   tmp_path: Path) -> None:
    create_topics(make_admin(bootstrap), experiment)
    codec = AvroCodec()
    workers = topic_name(experiment, Topic.WORKERS)
    heartbeat = event("WorkerHeartbeat", "w-1", 1.0, "test", worker_id="w-1", stats_given=False,
                      heartbeat_stats_json=None)
    records = [RawRecord(workers, 0, 0, b"w-1", codec.encode(heartbeat.kind, heartbeat.record)),
               RawRecord(workers, 0, 1, b"w-1", b"garbage")]  # the last record the batch holds of its partition
    writer = EventWriter(bootstrap, experiment, codec, producer_id="fold-test")
    views = PartitionViews(tmp_path, open_kv=lambda path: DictKV())
    views.assign([(workers, 0)])
    ctx = ProcessorContext(experiment=experiment, codec=codec, views=views, writer=writer, topics=(workers,))
    try:
        assert await fold_records(ctx, records) == 1
        assert views.next_offset(workers, 0) == 2  # past the garbage: a restart does not read it again
        assert await fold_records(ctx, records) == 0  # delivered again (a rebalance): nothing folds or copies
        assert ctx.counters.dead_lettered == 1 and ctx.counters.redelivered == 2
    finally:
        await ctx.close()
    [letter] = dead_letters(bootstrap, experiment)
    assert (letter.topic, letter.partition, letter.offset, letter.value) == (workers, 0, 1, b"garbage")
    assert letter.error_type == "CorruptRecordError" and letter.copies == 1

"""Reading events back in log order, with undecodable records diverted to the dead-letter topic."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from agl_events.events.codec import AvroCodec, CodecError
from agl_events.log.clients import make_consumer
from agl_events.log.consumer import raw_of
from agl_events.log.dead_letters import DeadLetter
from agl_events.log.records import LoggedEvent, Position, decode_record, reached
from agl_events.topics import Topic, topic_name

log = logging.getLogger(__name__)

_TRANSIENT = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT}
#: How long librdkafka waits to fetch again once its prefetch queue is full (`queued.max.messages.kbytes`). Its
#: default, 1 s, starved a catch-up: the view folds a full 8 MB queue in about half a second, then sat idle until
#: the next fetch (a rebuild of 100k spans: 7,350 spans/s with it, see docs/performance.md). The queue stays as
#: bounded as before; a full one is only looked at again sooner.
FETCH_QUEUE_BACKOFF_MS = 10


class EventReader:
    """Reads whole topics of an experiment by manual assignment (no group rebalancing).

    Views track their own offsets, so the reader starts where the view says, not where a consumer
    group last committed: the view's offsets are written in the same RocksDB batch as its state.
    """

    def __init__(self, bootstrap: str, experiment: str, codec: AvroCodec, topics: Iterable[Topic],
                 dead_letter: DeadLetter | None = None, *, fold_only: bool = False,
                 known: Callable[[str, int, int], LoggedEvent | None] | None = None,
                 **consumer_overrides: object) -> None:
        """`fold_only`: what is read is only folded into a view, so spans are read as far as their keys
        (`decode_record`). `known(topic, partition, offset)`: the event at that position if the caller holds it
        decoded already (a store's own appends, `StoreView.own_event`), handed on instead of decoding the record
        again; called on the polling thread."""
        self.codec = codec
        self._fold_only = fold_only
        self._known = known
        self.experiment = experiment
        self.topics = [topic_name(experiment, t) for t in topics]
        self._dead_letter = dead_letter
        self._consumer = make_consumer(bootstrap, None,
                                       **{"fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS, **consumer_overrides})
        # Watermark queries on the consuming handle queue behind its fetches (tens of ms each); a second,
        # idle handle answers them in well under a millisecond.
        self._meta = make_consumer(bootstrap, None)
        self._positions: dict[Position, int] = {}
        self.dead_lettered = 0

    def name_of(self, topic: Topic) -> str:
        return topic_name(self.experiment, topic)

    def partitions(self, timeout: float = 10.0) -> list[Position]:
        meta = self._consumer.list_topics(timeout=timeout)
        found: list[Position] = []
        for topic in self.topics:
            info = meta.topics.get(topic)
            if info is None or info.error is not None:
                raise RuntimeError(f"topic {topic} does not exist; run `agl-events topics create`")
            found.extend((topic, p) for p in sorted(info.partitions))
        return found

    def assign(self, start: Mapping[Position, int] | None = None,
               only: Callable[[Position], bool] | None = None) -> None:
        """Read every partition (or those `only` keeps), from `start[(topic, partition)]` (next offset to read)
        or the beginning."""
        start = start or {}
        assignment = [TopicPartition(t, p, start.get((t, p), OFFSET_BEGINNING)) for t, p in self.partitions()
                      if only is None or only((t, p))]
        self._positions = {(tp.topic, tp.partition): max(tp.offset, 0) for tp in assignment}
        self._consumer.assign(assignment)

    def add(self, positions: Iterable[Position], start: Mapping[Position, int]) -> None:
        """Read `positions` too, from `start` (next offset to read) or the beginning (a store group gave this
        store their rollouts)."""
        added = [TopicPartition(t, p, start.get((t, p), OFFSET_BEGINNING)) for t, p in positions
                 if (t, p) not in self._positions]
        self._positions.update({(tp.topic, tp.partition): max(tp.offset, 0) for tp in added})
        self._consumer.incremental_assign(added)

    def remove(self, positions: Iterable[Position]) -> None:
        """Stop reading `positions` (their rollouts went to another store of the group)."""
        removed = [TopicPartition(t, p) for t, p in positions if (t, p) in self._positions]
        for tp in removed:
            del self._positions[(tp.topic, tp.partition)]
        self._consumer.incremental_unassign(removed)

    def end_offsets(self, timeout: float = 30.0, topic: str | None = None) -> dict[Position, int]:
        """The high watermark of each assigned partition (of `topic`) now: the offset the next append gets."""
        assigned = list(self._positions)  # a copy: a store group may add or remove partitions meanwhile
        return {pos: self._watermark(pos, timeout) for pos in assigned if topic in (None, pos[0])}

    def _watermark(self, position: Position, timeout: float) -> int:
        """A just-created topic can answer NOT_LEADER for a moment after metadata shows its leader: retry."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._meta.get_watermark_offsets(TopicPartition(*position), timeout=timeout)[1]
            except KafkaException as exc:
                if exc.args[0].code() not in _TRANSIENT or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def cached_end_offsets(self) -> dict[Position, int]:
        """The high watermark of each assigned partition as of the last fetch response (no broker request, so
        a metrics scrape can ask every time); a partition not fetched yet counts as ending where it is read."""
        ends: dict[Position, int] = {}
        for position, read in list(self._positions.items()):
            high = self._consumer.get_watermark_offsets(TopicPartition(*position), cached=True)[1]
            ends[position] = max(high, read)
        return ends

    def caught_up_to(self, targets: Mapping[Position, int]) -> bool:
        return reached(self._positions, targets)

    @property
    def positions(self) -> dict[Position, int]:
        """Next offset to read per assigned partition (dead-lettered records count as read)."""
        return dict(self._positions)

    def poll(self, max_records: int = 1000, timeout: float = 0.1) -> list[LoggedEvent]:
        """Up to `max_records` decoded events within `timeout` (it waits the whole timeout unless that many
        come); undecodable ones go to the dead-letter handler.

        Why `consume(n, timeout)` and not a blocking `poll()` for the first record followed by a drain: with
        the latter, the store's own acks=all appends intermittently took 30+ s (librdkafka's request timeout,
        then a retry) under the runners' load; measured, not understood. The follower instead shortens the
        timeout while records flow and lengthens it while idle (`store.follower`).
        """
        out: list[LoggedEvent] = []
        for msg in self._consumer.consume(max_records, timeout):
            error = msg.error()
            if error is not None:
                position = (msg.topic() or "", msg.partition() or 0)
                if error.code() == KafkaError._PARTITION_EOF:  # the end, even past offsets with no record
                    if position in self._positions:  # not a partition removed since the fetch
                        self._positions[position] = max(self._positions[position], msg.offset() or 0)
                else:
                    log.warning("consumer error: %s", error)
                continue
            position, offset = (msg.topic() or "", msg.partition() or 0), msg.offset() or 0
            if position not in self._positions:  # fetched before its partition was removed
                continue
            self._positions[position] = offset + 1
            known = self._known(*position, offset) if self._known is not None else None
            if known is not None:
                out.append(known)
                continue
            raw = raw_of(msg)
            try:
                out.append(decode_record(self.codec, raw, fold_only=self._fold_only))
            except CodecError as exc:
                self.dead_lettered += 1
                log.error("undecodable record at %s[%d]@%d: %s", raw.topic, raw.partition, raw.offset, exc)
                if self._dead_letter is not None:
                    self._dead_letter(raw, exc)
        return out

    def close(self) -> None:
        self._consumer.close()
        self._meta.close()


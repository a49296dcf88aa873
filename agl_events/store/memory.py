"""The in-memory backend: a list per topic as the log and a dict as the view. The reference for tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agl_events.events.codec import AvroCodec
from agl_events.log.encoding import encode_event
from agl_events.log.records import EncodedEvent, LoggedEvent, NewEvent
from agl_events.store.base import LightningStoreCapabilities
from agl_events.store.service import EventSourcedStore
from agl_events.views.kv import DictKV
from agl_events.views.store_view import StoreView


class InMemoryLog:
    """Appends keep order per topic (one partition each). Records are encoded (within the same size limit)
    and decoded through the real codec so that anything the Kafka backend would reject is rejected here too."""

    def __init__(self, codec: AvroCodec | None = None) -> None:
        self.codec = codec or AvroCodec()
        self.topics: dict[str, list[LoggedEvent]] = {}

    def encode(self, new: NewEvent) -> bytes:
        return encode_event(self.codec, new)

    def append(self, events: Sequence[EncodedEvent]) -> asyncio.Future[list[LoggedEvent]]:
        logged = []
        for encoded in events:
            new = encoded.new
            record = self.codec.decode(encoded.value).record
            entries = self.topics.setdefault(new.topic.value, [])
            entry = LoggedEvent(new.kind, new.key, record, new.topic.value, 0, len(entries))
            entries.append(entry)
            logged.append(entry)
        done: asyncio.Future[list[LoggedEvent]] = asyncio.get_running_loop().create_future()
        done.set_result(logged)
        return done


class InMemoryLightningStore(EventSourcedStore):
    """Not durable and single-process: for tests and quick experiments."""

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return {**super().capabilities, "zero_copy": False}

    def __init__(self, scan_debounce_seconds: float = 10.0) -> None:
        self.log = InMemoryLog()
        super().__init__(self.log, StoreView(DictKV(), track_own=False), producer_id="memory-store",
                         scan_debounce_seconds=scan_debounce_seconds)

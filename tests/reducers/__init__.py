"""Pure tests of the reducers: events folded into a plain dict, as the view folds them into RocksDB.

Events are built as commands build them (typed, `events.typed`) and go through the real codec (encode, then
decode), so each record has exactly the shape the log delivers and a test cannot fold a record the log would
reject.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from agl_events.events.codec import AvroCodec
from agl_events.events.kinds import spec
from agl_events.events.typed import Decided
from agl_events.log.records import LoggedEvent
from agl_events.reducers import Changes, reduce

View = dict[str, Any]

_CODEC = AvroCodec()


def logged(event: Decided, time: float = 1.0) -> LoggedEvent:
    """`event` decided at `time`, as a reader gets it back from the log."""
    stamped = event.stamp(time, "test")
    decoded = _CODEC.decode(_CODEC.encode(stamped.kind, stamped.to_record())).record
    return LoggedEvent(stamped.kind, stamped.key, decoded, spec(stamped.kind).topic.value, 0, 0)


def apply(view: View, changes: Changes) -> None:
    """Write changes as a KeyValue does: None deletes, values are stored as JSON (never aliased), bytes as they
    are (a span read from the log)."""
    for key, value in changes.items():
        if value is None:
            view.pop(key, None)
        else:
            view[key] = value if isinstance(value, bytes) else orjson.loads(orjson.dumps(value))


def changes_of(view: View, e: LoggedEvent) -> Changes:
    """The changes of `e` as the store's view folds it: a span with its bytes (`LoggedEvent.value`), where known."""
    return reduce(view.get, e.kind, e.record, e.value)


def fold(events: Iterable[LoggedEvent], view: View | None = None) -> View:
    """Fold `events` in order into `view` (a fresh one by default) and return it."""
    view = {} if view is None else view
    for e in events:
        apply(view, changes_of(view, e))
    return view


__all__ = ["View", "apply", "changes_of", "fold", "logged"]

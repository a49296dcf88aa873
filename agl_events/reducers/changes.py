"""What a reducer returns: the keys to write (None deletes), computed from reads of the current view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agl_events.reducers import keys

Read = Callable[[str], Any]
Changes = dict[str, Any]


class Pending:
    """Reads that see the changes already decided for this event, so reducers compose."""

    def __init__(self, read: Read) -> None:
        self._read = read
        self.changes: Changes = {}
        #: Why the event changed nothing although it should have (its rollout or attempt is not in the view).
        self.ignored: str | None = None
        #: The entities the event created (counted by `create`), which the view also counts per log partition.
        self.created: list[str] = []

    def get(self, key: str) -> Any:
        return self.changes[key] if key in self.changes else self._read(key)

    def put(self, key: str, value: Any) -> None:
        self.changes[key] = value

    def delete(self, key: str) -> None:
        self.changes[key] = None

    def create(self, key: str, value: Any, entity: str) -> None:
        """Put `value`, counting a new entity only when the key did not exist (re-applying counts nothing)."""
        if self.get(key) is None:
            self._count(entity)
        self.put(key, value)

    def create_new(self, key: str, value: Any, entity: str) -> None:
        """`create` for a key the reducer knows is absent (an index of its own says so): one read of the view
        fewer, which is one per span folded."""
        self._count(entity)
        self.put(key, value)

    def _count(self, entity: str) -> None:
        self.put(keys.count(entity), (self.get(keys.count(entity)) or 0) + 1)
        self.created.append(entity)

    def ignore(self, reason: str) -> None:
        """The event names a rollout or attempt the view does not hold, where the log puts its creation before
        it (same topic, same key, so the same partition): it can only come from a writer that bypassed the
        store. It changes nothing; the live store copies it to the dead-letter topic with `reason`."""
        self.ignored = reason

    def chmax(self, key: str, value: int) -> None:
        current = self.get(key)
        if current is None or value > current:
            self.put(key, value)

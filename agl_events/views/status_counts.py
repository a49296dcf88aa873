"""Rollouts by status, counted as the view is written, for `/metrics` and `/ui` without a scan per scrape.

A KeyValue wrapper: every write that puts or deletes a rollout (`r/<id>`) moves one count from the status the
view held to the one it gets, read from the view just before the batch is written. The counts are therefore
always the histogram of the statuses the view holds, whatever order events are folded in (the store's own
events at once, the log's later, a replay from older positions after a crash), with no reducer involved.

Counting starts on first demand (`counts()`): one scan of the rollouts then, nothing before, so a store
nobody scrapes pays nothing, and a scraped one pays a dict update per rollout write. Not persisted: a
restarted store counts again on the first scrape. The view is written from the event loop's thread only
(committer and follower), which is what makes the scan and the updates consistent without a lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from agl_events.reducers import keys
from agl_events.views.kv import KeyValue


class StatusCountingKV:
    """A KeyValue that keeps the count of rollouts per status once asked for it."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv
        self._counts: Counter[str] | None = None

    def get(self, key: str) -> Any:
        return self._kv.get(key)

    def scan(self, prefix: str, start: str | None = None) -> Iterator[tuple[str, Any]]:
        return self._kv.scan(prefix, start)

    def write(self, changes: Mapping[str, Any]) -> None:
        if self._counts is not None:
            for key, value in changes.items():
                if key.startswith(keys.ROLLOUTS):
                    self._move(self._kv.get(key), value)
        self._kv.write(changes)

    def _move(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        assert self._counts is not None
        old = None if before is None else before["status"]
        new = None if after is None else after["status"]
        if old == new:
            return
        if old is not None:
            self._counts[old] -= 1
        if new is not None:
            self._counts[new] += 1

    def counts(self) -> dict[str, int]:
        """Rollouts per status now (statuses with none left out)."""
        if self._counts is None:
            self._counts = Counter(rollout["status"] for _, rollout in self._kv.scan(keys.ROLLOUTS))
        return {status: n for status, n in self._counts.items() if n > 0}

    def close(self) -> None:
        self._kv.close()

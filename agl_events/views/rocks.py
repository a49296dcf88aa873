"""The view's KeyValue in RocksDB (rocksdict): what the Kafka store and the processor keep their views in.

A batch of changes is one WriteBatch, together with the log positions it brings the view to, so a crash
leaves either the old view and positions or the new ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rocksdict import AccessType, Options, Rdict, ReadOptions, WriteBatch

from agl_events.views.kv import dump_value, load_value

#: RocksDB memtable size per view (see RocksKV).
WRITE_BUFFER_BYTES = 16 * 1024 * 1024
#: Values last written that a view keeps in memory for point reads (see RocksKV.get).
RECENT_ENTRIES = 8192


class ViewUnavailableError(OSError):
    """A view's folder cannot be opened (held by another process, unreadable, not a view): the message says
    which folder and why. A store answers 503 with it rather than a 500, a condition of the machine and not
    a fault of the request."""


class RocksKV:
    """RocksDB through rocksdict in raw mode: bytes keys sort as the key space in `reducers.keys` expects.

    `read_only` opens an existing view without RocksDB's writer lock, so it can be read while a live store
    writes it: it holds what the folder held when opened (a frozen view), and `write` fails.

    The stored bytes of the last RECENT_ENTRIES keys written (None for a deletion) answer point reads without
    RocksDB: a store folding a rollout's events reads its rollout, attempt, counters and worker again and again
    across batches, and in the medium bench 42 of its ~77 reads per rollout are of keys it wrote moments
    before (a lookup and key encoding, ~1 us each, saved; values are still decoded per read, so every read
    gets its own copy as the KeyValue contract says). Only writes fill it, never reads, so a read on another
    thread cannot put back a value a write has just replaced. Spans' bytes are not kept: they are read by
    scans, never by key, and would crowd out the keys that are.
    """

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        options = Options(raw_mode=True)
        options.create_if_missing(not read_only)
        # A view is rebuilt by streaming the log through it: RocksDB's default 64 MB memtables made the
        # store's memory grow with the history; 16 MB flush sooner at no measurable cost in fold speed.
        options.set_write_buffer_size(WRITE_BUFFER_BYTES)
        access = AccessType.read_only() if read_only else AccessType.read_write()
        if read_only and not path.is_dir():
            raise ViewUnavailableError(f"no view in {path}")
        try:
            path.mkdir(parents=True, exist_ok=True)
            self._db = Rdict(str(path), options, access_type=access)
        except Exception as exc:  # rocksdict raises a bare Exception ("IO error: ... LOCK: ...")
            raise ViewUnavailableError(f"the view in {path} cannot be opened: {exc}") from exc
        #: Insertion order is write order: a key written again moves to the end, the oldest go first.
        self._recent: dict[str, bytes | None] = {}

    def get(self, key: str) -> Any:
        raw = self._recent.get(key, _UNKNOWN)
        if raw is _UNKNOWN:
            raw = self._db.get(key.encode())
        return None if raw is None else load_value(raw)

    def scan(self, prefix: str) -> Iterator[tuple[str, Any]]:
        """The entries under `prefix`, in key order.

        The iterator is bounded above by the first key past the prefix: without the bound, RocksDB steps over
        every deleted key that follows the prefix before it finds the live one that ends the scan, and a
        buffer whose entries are deleted as they are used (the samples buffer) piles those up, which made
        an export of 150k spans spend 28 of its 71 s in such scans (0.9 ms each; 3 us bounded).
        """
        start = prefix.encode()
        options = ReadOptions()
        end = _successor(start)
        if end is not None:
            options.set_iterate_upper_bound(end)
        for raw_key, raw in self._db.items(from_key=start, read_opt=options):
            yield raw_key.decode(), load_value(raw)

    def write(self, changes: Mapping[str, Any]) -> None:
        batch = WriteBatch(raw_mode=True)
        written: list[tuple[str, bytes | None]] = []
        for key, value in changes.items():
            if value is None:
                batch.delete(key.encode())
                written.append((key, None))
            elif isinstance(value, bytes):
                batch.put(key.encode(), dump_value(value))
                written.append((key, _UNKNOWN))
            else:
                stored = dump_value(value)
                batch.put(key.encode(), stored)
                written.append((key, stored))
        self._db.write(batch)
        # Only once written: a batch RocksDB refused leaves the recent values as the view still holds them.
        recent = self._recent
        for key, stored in written:
            recent.pop(key, None)
            if stored is not _UNKNOWN:
                recent[key] = stored
        while len(recent) > RECENT_ENTRIES:
            del recent[next(iter(recent))]

    def close(self) -> None:
        self._recent.clear()
        self._db.close()


#: Marks a key whose value the recent entries do not hold (None there means deleted).
_UNKNOWN: Any = object()


def _successor(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key that starts with `prefix`; None when there is none (empty, or
    all 0xff bytes)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None

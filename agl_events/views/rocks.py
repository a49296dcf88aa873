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


class ViewUnavailableError(OSError):
    """A view's folder cannot be opened (held by another process, unreadable, not a view): the message says
    which folder and why. A store answers 503 with it rather than a 500, a condition of the machine and not
    a fault of the request."""


class RocksKV:
    """RocksDB through rocksdict in raw mode: bytes keys sort as the key space in `reducers.keys` expects.

    `read_only` opens an existing view without RocksDB's writer lock, so it can be read while a live store
    writes it: it holds what the folder held when opened (a frozen view), and `write` fails.
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

    def get(self, key: str) -> Any:
        raw = self._db.get(key.encode())
        return None if raw is None else load_value(raw)

    def scan(self, prefix: str, start: str | None = None) -> Iterator[tuple[str, Any]]:
        """The entries under `prefix`, in key order, from `start` when given.

        The iterator is bounded above by the first key past the prefix: without the bound, RocksDB steps over
        every deleted key that follows the prefix before it finds the live one that ends the scan, and a
        buffer whose entries are deleted as they are used (the samples buffer) piles those up, which made
        an export of 150k spans spend 28 of its 71 s in such scans (0.9 ms each; 3 us bounded).
        """
        options = ReadOptions()
        end = _successor(prefix.encode())
        if end is not None:
            options.set_iterate_upper_bound(end)
        for raw_key, raw in self._db.items(from_key=(start or prefix).encode(), read_opt=options):
            yield raw_key.decode(), load_value(raw)

    def write(self, changes: Mapping[str, Any]) -> None:
        batch = WriteBatch(raw_mode=True)
        for key, value in changes.items():
            if value is None:
                batch.delete(key.encode())
            else:
                batch.put(key.encode(), dump_value(value))
        self._db.write(batch)

    def close(self) -> None:
        self._db.close()


def _successor(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key that starts with `prefix`; None when there is none (empty, or
    all 0xff bytes)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None

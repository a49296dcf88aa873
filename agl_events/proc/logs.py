"""Reading the log files of processes: the last lines, lines appended from now on (`tail -F`), and what was
written after a known offset."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path


def tail_file(path: Path, n: int, block_size: int = 65536) -> list[str]:
    """The last `n` lines of `path`, reading backwards so a 50 MB log costs one block or two."""
    if n <= 0 or not path.exists():
        return []
    with path.open("rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        data = b""
        position = end
        while position > 0 and data.count(b"\n") <= n:
            position = max(0, position - block_size)
            handle.seek(position)
            data = handle.read(end - position)
    return data.decode(errors="replace").splitlines()[-n:]


def follow_file(path: Path, poll_interval: float) -> Iterator[str]:
    """`tail -F`: yield new lines, reopening the file when it is rotated or recreated; never returns."""
    handle = None
    inode = None
    from_end = True  # only the file as it is now is skipped; a new or rotated one is read whole
    try:
        while True:
            if handle is None and path.exists():
                handle = path.open("r", errors="replace")
                inode = os.fstat(handle.fileno()).st_ino
                if from_end:
                    handle.seek(0, os.SEEK_END)
            from_end = False
            line = handle.readline() if handle is not None else ""
            if line:
                yield line.rstrip("\n")
                continue
            if handle is not None and _rotated(path, inode, handle.tell()):
                handle.close()
                handle = None
                continue
            time.sleep(poll_interval)
    finally:
        if handle is not None:
            handle.close()


def _rotated(path: Path, inode: int | None, position: int) -> bool:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    return stat.st_ino != inode or stat.st_size < position


def read_from(path: Path, offset: int, limit: int = 4 << 20) -> list[str]:
    """The lines of `path` after byte `offset` (at most the last `limit` bytes of them); from the start when the
    file is shorter than `offset` (it was rotated meanwhile)."""
    if not path.exists():
        return []
    with path.open("rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        start = offset if offset <= end else 0
        handle.seek(max(start, end - limit))
        return handle.read().decode(errors="replace").splitlines()

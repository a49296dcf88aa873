"""One store process per views folder: an exclusive lock on `<views>/store.lock`, held while the process lives.

RocksDB lets one process write a database folder. Two `agl-events store` processes given the same views root
(two stores of one experiment started with the same home) used to find that out on the first request for an
experiment both serve, and then on every write: RocksDB's `LOCK: Resource temporarily unavailable`, a 500.
Any store serves any experiment, so the conflict is known at start: the second process takes this lock
there and is refused before it serves anything. The lock is a `flock` on an open file, so the kernel drops
it when the process ends, however it ends (a SIGKILLed store leaves nothing stale behind); the file holds
the holder's pid, so a refusal names the process.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from agl_events.proc.pids import command_line

#: The lock file's name in the views root (RocksDB's own lock, `LOCK`, is in each experiment's folder).
LOCK_NAME = "store.lock"


@dataclass(frozen=True)
class Holder:
    """The process holding a views folder: its pid (None in the instant between its lock and its write of
    the pid) and its command line (None where it cannot be read)."""

    pid: int | None
    command: str | None

    def __str__(self) -> str:
        if self.pid is None:
            return "another process"
        return f"pid {self.pid} ({(self.command or 'command line unknown').strip()})"


class ViewsInUseError(RuntimeError):
    """Another live process holds the views folder; the message is the one line a user needs."""

    def __init__(self, folder: Path, holder: Holder,
                 remedy: str = "give this store a folder of its own with --views DIR") -> None:
        self.folder = folder
        self.holder = holder
        super().__init__(f"the views folder {folder} is in use by {holder}: {remedy}")


class ViewsLock:
    """The lock on the views root `root` (created if missing), taken at once or `ViewsInUseError`; released by
    `release()`, the end of a `with` block, or the end of the process."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ViewsInUseError(root, _holder(root / LOCK_NAME)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None

    def __enter__(self) -> ViewsLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()


def holder_of(path: Path) -> tuple[Path, Holder] | None:
    """The views root that `path` is or lies in, with the live process holding it; None when no live process
    holds `path` or a folder above it (a folder a store held before it died is free)."""
    for folder in (path, *path.parents):
        lock = folder / LOCK_NAME
        if not lock.is_file():
            continue
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return folder, _holder(lock)
        finally:
            os.close(fd)
    return None


def _holder(lock: Path) -> Holder:
    """Who holds `lock`, from the pid it wrote there."""
    try:
        pid = int(lock.read_text().strip())
    except (OSError, ValueError):
        return Holder(None, None)
    return Holder(pid, command_line(pid))

"""CPU seconds spent by each part of a benchmark run (store, runners, broker) while its clock runs.

On a machine whose cores are shared by the broker, the store and the runners, a throughput figure
alone cannot say what to make faster; the CPU each process used in the measured window can. Read
from /proc (Linux); elsewhere the meter reports nothing rather than guessing.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


#: The JVM's JIT compiler threads ("C1 CompilerThread0", "C2 CompilerThread1"; /proc shows 15 characters of a name).
JIT_THREADS = re.compile(r"C\d CompilerThre")


def _stat_seconds(stat: Path) -> float | None:
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14 and 15 of stat(5)


def process_cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of `pid` so far (None if it is gone or /proc is missing)."""
    return _stat_seconds(Path(f"/proc/{pid}/stat"))


def thread_cpu_seconds(pid: int, name: re.Pattern[str]) -> float | None:
    """user + system CPU seconds so far of `pid`'s threads whose name (/proc's `comm`) matches `name` (None if the
    process is gone or /proc is missing): how a process's CPU splits between its own kinds of threads, such as a
    JVM's JIT compiler (`JIT_THREADS`) and its work. Only live threads count: an ended one took its seconds along."""
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    return sum(_named_thread_seconds(thread, name) for thread in threads)


def _named_thread_seconds(thread: Path, name: re.Pattern[str]) -> float:
    try:
        named = name.match((thread / "comm").read_text()) is not None
    except OSError:  # it ended meanwhile
        return 0.0
    return (_stat_seconds(thread / "stat") or 0.0) if named else 0.0


class CpuMeter:
    """CPU seconds per named group of processes between `start()` and `stop()`."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self._start: dict[int, float | None] = {}
        self._wall = 0.0
        self.seconds: dict[str, float] = {}

    def _read(self) -> dict[int, float | None]:
        return {pid: process_cpu_seconds(pid) for pids in self.groups.values() for pid in pids}

    def start(self) -> None:
        self._wall = time.perf_counter()
        self._start = self._read()

    def stop(self) -> dict[str, float]:
        """CPU seconds per group, plus `wall` (the window) and `cores` (how many cores the window had)."""
        end, wall = self._read(), time.perf_counter() - self._wall
        self.seconds = {}
        for name, pids in self.groups.items():
            used = [end[p] - start for p in pids if (start := self._start.get(p)) is not None and end[p] is not None]
            if used:
                self.seconds[name] = sum(used)
        self.seconds["wall"] = wall
        self.seconds["cores"] = float(os.cpu_count() or 1)
        return self.seconds

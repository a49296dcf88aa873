"""CPU seconds spent by each part of a benchmark run (store, runners, broker) while its clock runs.

On a machine whose cores are shared by the broker, the store and the runners, a throughput figure
alone cannot say what to make faster; the CPU each process used in the measured window can. Read
from /proc (Linux); elsewhere the meter reports nothing rather than guessing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of `pid` so far (None if it is gone or /proc is missing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14 and 15 of stat(5)


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

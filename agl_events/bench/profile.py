"""py-spy profiles of benchmark processes over the measured window, and their top frames.

    agl-events bench --preset medium --profile DIR

CPU per process (`cpu.py`) says which process to make faster; a sampling profile says where in it. py-spy
(in the `test` extra) attaches to running processes by pid, so the store and the runners are profiled
exactly while the bench's clock runs, with no change to their code. Each process gets a raw file of
collapsed stacks (`DIR/<name>.txt`, flamegraph.pl's input); `top_frames` sums them per function.
"""

from __future__ import annotations

import logging
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: Samples per second and process: 5 processes at 50 Hz cost a few percent of a core, not 10.
SAMPLE_RATE = 50
#: A frame of py-spy's raw output: "function (path/to/module.py)" with --nolineno.
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*)\)$")


@dataclass(frozen=True)
class FrameShare:
    """One function's share of a process's samples: where the CPU was (self) and under it (total)."""

    frame: str
    self_share: float
    total_share: float


class Profiler:
    """`py-spy record` attached to each named pid from `start()` to `stop()`; raw stacks under `out_dir`."""

    def __init__(self, out_dir: Path, targets: dict[str, int], rate: int = SAMPLE_RATE) -> None:
        self.out_dir = out_dir
        self.targets = targets
        self.rate = rate
        self._spies: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for name, pid in self.targets.items():
            command = [py_spy(), "record", "--pid", str(pid), "--format", "raw", "--nolineno", "--nonblocking",
                       "--rate", str(self.rate), "--output", str(self.path(name))]
            self._spies[name] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def path(self, name: str) -> Path:
        return self.out_dir / f"{name}.txt"

    def stop(self) -> dict[str, Path]:
        """Stop sampling (py-spy writes its file on SIGINT); the files that came out, by name."""
        for spy in self._spies.values():
            spy.send_signal(signal.SIGINT)
        written = {}
        for name, spy in self._spies.items():
            try:
                _, err = spy.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()
                _, err = spy.communicate()
            if self.path(name).exists():
                written[name] = self.path(name)
            else:
                log.warning("no profile of %s: %s", name, err.decode(errors="replace")[-500:])
        self._spies.clear()
        return written


def py_spy() -> str:
    """The py-spy next to this interpreter (a venv's bin, not always on PATH), else the one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise RuntimeError("py-spy is not installed: pip install py-spy (it is in the test extra)")
    return found


def _frame_name(raw: str) -> str:
    """`function (file)` with the file shortened to its last two parts: stable across venvs."""
    match = _FRAME.match(raw.strip())
    if match is None:
        return raw.strip()
    file = "/".join(Path(match["file"]).parts[-2:])
    return f"{match['function']} ({file})"


def top_frames(path: Path, limit: int = 8) -> list[FrameShare]:
    """The functions with the most samples in a raw py-spy file, by self share (total share alongside).

    Threads waiting in a poll or a lock still count as samples when py-spy cannot tell them idle; their
    frames (`poll`, `wait`, `select`) show as large selves and are read as waiting, not work."""
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            under[frame] += count
    if not samples:
        return []
    return [FrameShare(frame, count / samples, under[frame] / samples) for frame, count in own.most_common(limit)]

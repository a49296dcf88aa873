"""py-spy profiles of benchmark processes over the measured window, and their top frames.

    agl-events bench --preset medium --profile DIR

CPU per process (`cpu.py`) says which process to make faster; a sampling profile says where in it. py-spy
(in the `test` extra) attaches to running processes by pid, so the store and the runners are profiled
exactly while the bench's clock runs, with no change to their code. Each process gets a raw file of
collapsed stacks (`DIR/<name>.txt`, flamegraph.pl's input); `top_frames` sums them per function, and
`cpu_parts` per part of our path (`STORE_PARTS`, `RUNNER_PARTS`).

py-spy samples only the thread holding the GIL (`--gil`): a sample is then Python at work (or waiting for a
core while it holds the GIL), never a thread parked in a C call (librdkafka's poll, epoll), which py-spy
cannot tell idle and would count as busy.
"""

from __future__ import annotations

import logging
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: Samples per second and process: 5 processes at 100 Hz cost a few percent of a core (py-spy's own), and a
#: sub-second window still gets ~100 samples of a busy process.
SAMPLE_RATE = 100
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
                       "--gil", "--full-filenames", "--rate", str(self.rate), "--output", str(self.path(name))]
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


def _stacks(paths: Path | Iterable[Path]) -> Counter[tuple[str, ...]]:
    """Samples per stack (root first, raw frames) in one or more raw py-spy files; the process and thread
    pseudo-frames are dropped."""
    stacks: Counter[tuple[str, ...]] = Counter()
    for path in [paths] if isinstance(paths, Path) else paths:
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            frames = tuple(f for f in stack.split(";") if f and not f.startswith(("process ", "thread ")))
            if frames:
                stacks[frames] += int(count_text)
    return stacks


def top_frames(paths: Path | Iterable[Path], limit: int = 8) -> list[FrameShare]:
    """The functions with the most samples in raw py-spy files, by self share (total share alongside)."""
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    stacks = _stacks(paths)
    for stack, count in stacks.items():
        frames = [_frame_name(f) for f in stack]
        own[frames[-1]] += count
        for frame in set(frames):
            under[frame] += count
    samples = sum(stacks.values())
    if not samples:
        return []
    return [FrameShare(frame, count / samples, under[frame] / samples) for frame, count in own.most_common(limit)]


#: A part of a process's work and the source files that are it (fragments of full paths): `cpu_parts` gives a
#: sample to the part of its deepest frame that matches any part, trying the parts in this order for that
#: frame. Libraries that several parts call (json, confluent_kafka, pydantic) are in none, so their frames count
#: for the part of ours that called them.
Parts = Sequence[tuple[str, tuple[str, ...]]]

_EVENT_LOOP = ("event loop", ("/asyncio/", "/selectors.py"))
_THREADS = ("thread hand-offs", ("/concurrent/futures/", "/threading.py", "/queue.py"))

#: The store process: which stage of command -> event -> log -> reducer -> view a sample was in.
STORE_PARTS: Parts = (
    ("codec (encode, decode)", ("/agl_events/events/codec.py", "/agl_events/events/leading.py",
                                "/agl_events/log/encoding.py", "/fastavro/")),
    ("decisions (commands)", ("/agl_events/store/commands/",)),
    ("committer (append, produce, acks)", ("/agl_events/store/committer.py", "/agl_events/log/writer.py",
                                           "/agl_events/log/sink.py")),
    ("follower (poll, fold, RocksDB)", ("/agl_events/log/reader.py", "/agl_events/store/follower.py",
                                        "/agl_events/views/", "/agl_events/reducers/")),
    ("HTTP (server, routes, JSON)", ("/agl_events/server/", "/uvicorn/", "/starlette/", "/fastapi/", "/httptools/",
                                     "/h11/")),
    ("store (queries, waits, lanes)", ("/agl_events/store/",)),
    ("benchmark's own client", ("/agl_events/bench/",)),
    _THREADS, _EVENT_LOOP,
)

#: A runner process: the workload (its agent and OpenTelemetry's SDK: the same code on Agent Lightning's side)
#: apart from what agl-events adds around it.
RUNNER_PARTS: Parts = (
    ("task queue (share group)", ("/agl_events/runner/tasks.py", "/agl_events/log/share.py")),
    ("tracer (span -> Kafka)", ("/agl_events/tracer/", "/agl_events/log/", "/agl_events/events/", "/fastavro/")),
    ("HTTP client (claims, finishes)", ("/agl_events/server/client.py", "/aiohttp/", "/yarl/", "/multidict/")),
    ("workload (agent, OpenTelemetry SDK)", ("/agl_events/bench/", "/agl_events/emitter/", "/opentelemetry/",
                                             "/random.py")),
    ("runner (slots, rollouts, heartbeats)", ("/agl_events/runner/", "/agl_events/agent/")),
    _THREADS, _EVENT_LOOP,
)

#: Samples no part claims (the interpreter's own start-up frames, libraries called from nowhere we know).
OTHER = "other"


def cpu_parts(paths: Path | Iterable[Path], parts: Parts, rate: int = SAMPLE_RATE) -> dict[str, float]:
    """Seconds sampled per part (samples / rate) in raw py-spy `--gil` files sampled at `rate`, largest first,
    with `OTHER` for samples no part claims."""
    seconds: Counter[str] = Counter()
    for stack, count in _stacks(paths).items():
        seconds[_part_of(stack, parts)] += count / rate
    return dict(seconds.most_common())


def _part_of(stack: tuple[str, ...], parts: Parts) -> str:
    for frame in reversed(stack):
        match = _FRAME.match(frame.strip())
        file = match["file"] if match is not None else frame
        for name, fragments in parts:
            if any(fragment in file for fragment in fragments):
                return name
    return OTHER

"""A command in a child process, its output appended to a log file: what the supervisor of `agl-events up`, the
chaos run and the tests start (stores, processor workers, runners) when they need a process they can kill, stop
cleanly and start again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from agl_events.proc.logs import tail_file


class ChildProcess:
    """One command; `start` again after it exited starts it anew, appending to the same log.

    With `own_group` it runs in a session (and process group) of its own, and every signal goes to the whole
    group: a runner command's runner processes, which it spawns, then stop with it, and a crash of the command
    (SIGKILL) leaves none behind, since `stop` and `reap` kill what is left of the group. A terminal's Ctrl-C
    then reaches only the supervisor, which stops its children in order.
    """

    def __init__(self, command: Sequence[str], log_file: Path, *, env: Mapping[str, str] | None = None,
                 own_group: bool = False) -> None:
        self.command = list(command)
        self.log_file = log_file
        self.env = dict(env) if env is not None else None
        self.own_group = own_group
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> int:
        """Start it (again); returns its pid."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env, start_new_session=self.own_group)
        return self.process.pid

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status once it exited (negative: the signal that ended it); None while it runs."""
        return None if self.process is None else self.process.poll()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def send(self, sig: int) -> None:
        """Send `sig` to it (to its whole group with `own_group`)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            if self.own_group:
                os.killpg(self.process.pid, sig)
            else:
                self.process.send_signal(sig)

    def kill9(self) -> None:
        """SIGKILL: a crash, nothing flushed or closed."""
        if self.process is not None:
            self.send(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, sig: int = signal.SIGTERM, grace: float = 30.0) -> int | None:
        """Send `sig` (SIGTERM: a clean stop) and wait; SIGKILL after `grace` seconds. Returns the exit status."""
        if self.alive():
            self.send(sig)
        return self.finish(time.monotonic() + grace)

    def finish(self, deadline: float) -> int | None:
        """Wait for it to exit until `deadline` (time.monotonic), SIGKILL it then; returns the exit status. Several
        children stopping together each get `send` first, then `finish` with one deadline."""
        if self.alive():
            assert self.process is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(max(0.0, deadline - time.monotonic()))
            if self.alive():
                self.kill9()
        self.reap()
        return self.returncode

    def reap(self) -> None:
        """Kill what is left of its group once it exited (processes it started that outlived it)."""
        if self.own_group and self.process is not None and self.process.poll() is not None:
            self.send(signal.SIGKILL)

    def tail(self, lines: int = 40) -> str:
        """The end of its log, to say why it failed."""
        return "\n".join(tail_file(self.log_file, lines))


def rotate(log_file: Path, max_bytes: int, keep: int = 3) -> None:
    """Move `log_file` to `.1` (and older ones along, up to `.keep`) once it is larger than `max_bytes`; called
    before a start, so a process that crash-loops or runs for weeks never fills the disk with one log."""
    if not log_file.exists() or log_file.stat().st_size <= max_bytes:
        return
    for n in range(keep - 1, 0, -1):
        older = log_file.with_name(f"{log_file.name}.{n}")
        if older.exists():
            older.replace(log_file.with_name(f"{log_file.name}.{n + 1}"))
    log_file.replace(log_file.with_name(f"{log_file.name}.1"))


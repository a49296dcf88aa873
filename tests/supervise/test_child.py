"""A child process in a group of its own: what it started goes with it; its log is appended and rotated."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from agl_events.proc.child import ChildProcess, rotate
from agl_events.proc.pids import process_alive
from agl_events.supervise.state import describe_exit
from tests.eventually import eventually

#: Starts a grandchild that would outlive it, prints the grandchild's pid, then waits.
PARENT = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
          " print(p.pid, flush=True); time.sleep(60)")


def _grandchild(log: Path) -> int:
    printed = eventually(lambda: log.exists() and log.read_text().split(), "the child printing its child's pid",
                         within=10)
    return int(printed[0])


def test_a_crashed_child_leaves_nothing_behind(tmp_path: Path) -> None:
    child = ChildProcess([sys.executable, "-c", PARENT], tmp_path / "child.log", own_group=True)
    child.start()
    grandchild = _grandchild(child.log_file)
    child.process.send_signal(signal.SIGKILL)  # only the child: as a crash would
    child.process.wait(10)
    assert process_alive(grandchild)
    child.reap()
    assert _gone(grandchild)
    assert describe_exit(child.returncode) == "SIGKILL"


def test_stop_reaches_the_whole_group(tmp_path: Path) -> None:
    child = ChildProcess([sys.executable, "-c", PARENT], tmp_path / "child.log", own_group=True)
    child.start()
    grandchild = _grandchild(child.log_file)
    assert child.stop(signal.SIGTERM, grace=10) == -signal.SIGTERM
    assert _gone(grandchild)


def test_starts_again_appending_to_its_log(tmp_path: Path) -> None:
    child = ChildProcess([sys.executable, "-c", "print('hello')"], tmp_path / "logs" / "c.log")
    for _ in range(2):
        child.start()
        child.process.wait(10)
    assert child.tail() == "hello\nhello" and describe_exit(child.returncode) == "0"


def test_rotate_moves_a_large_log_aside(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    for content in ("first", "second", "third", "fourth"):
        log.write_text(content * 10)
        rotate(log, max_bytes=20, keep=2)
    assert not log.exists()
    assert (tmp_path / "x.log.1").read_text().startswith("fourth")
    assert (tmp_path / "x.log.2").read_text().startswith("third")
    assert not (tmp_path / "x.log.3").exists()
    log.write_text("small")
    rotate(log, max_bytes=20)
    assert log.read_text() == "small"


def _gone(pid: int) -> bool:
    return eventually(lambda: not process_alive(pid), f"process {pid} gone", within=10)

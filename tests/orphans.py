"""Children whose parent was SIGKILLed: start a parent that starts one, kill the parent, see the child go."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def orphan(parent_script: str, stdin: str, alive: Callable[[str], None] = lambda _: None
           ) -> tuple[str, subprocess.Popen[str]]:
    """Run `parent_script` (Python, fed `stdin`), which starts a child and prints a line about it (its pid, its
    port), call `alive(line)` while the parent lives, then SIGKILL the parent (no stop, no atexit): the line, and
    the dead parent, whose stderr the child inherited (read it to its end once the child exited)."""
    parent = subprocess.Popen([sys.executable, "-c", parent_script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert parent.stdin is not None and parent.stdout is not None
        parent.stdin.write(stdin)
        parent.stdin.close()
        line = parent.stdout.readline()
        alive(line)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    return line, parent


def exited(pid: int) -> bool:
    """Whether `pid` ended (gone, or a zombie no one has reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"
